/* view_overview.js -- the Overview (#/overview): the diagnosis first, then the job.
 *
 * Draws the verdict as a sentence; the findings as cards, root cause first, each with its
 * saving (the sentence's figure), its workers, its function and an Evidence link, those
 * whose fix saves nothing folded under "Not worth fixing"; the job's figures; every worker
 * at a glance (a bar per rank: its largest excess over the median worker, from the Heatmap
 * section; a bar per node in the bounded form; a lone worker's own steps) and the median
 * worker's step split by class.
 * Report keys: diagnosis (verdict, findings, joint_impact, step_model, input_problem,
 * inputs), job (world_size, missing_ranks, missing_count, steps, median_step_time_ms),
 * workers (status, breakdown, steps), Heatmap, scale (nodes, distributions),
 * perftracker_version, generated_at.
 * Cost: a few elements per finding; the glance is one canvas (PD.barPlot) after one pass
 * over the heatmap's cells (PD.heatmapExcess); the median step, one median per class.
 *
 * Design: PD.views.overview(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.overview = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var R = ctx.R, job = ctx.job, diagnosis = ctx.diagnosis, findings = ctx.findings, workers = ctx.workers,
      analyzed = ctx.analyzed, scale = ctx.scale, culprits = ctx.culprits, worthFixing = ctx.worthFixing,
      savingStepMs = ctx.savingStepMs, stepMs = ctx.stepMs, missingCount = ctx.missingCount, sampled = ctx.sampled,
      worldSize = ctx.worldSize, workersAnalyzed = ctx.workersAnalyzed;
  var savesNothing = ctx.savesNothing, section = ctx.section, workerName = ctx.workerName, statCards = ctx.statCards,
      breakdownBar = ctx.breakdownBar, breakdownLegend = ctx.breakdownLegend, later = ctx.later,
      hangTable = ctx.hangTable, findingHref = ctx.findingHref, heatmapColumn = ctx.heatmapColumn,
      quantile = ctx.quantile, rankRanges = ctx.rankRanges, sampleNote = ctx.sampleNote;

  /* Overview ---------------------------------------------------------------------------- */
  var CATEGORY_LABEL = { gpu_compute: 'GPU compute', gpu_memory: 'GPU memory', communication: 'communication',
                         cuda_runtime: 'CUDA runtime', python: 'Python', hang: 'hang', hardware: 'hardware', host: 'host CPU',
                         cpu_bound: 'CPU-bound', other: 'other' };

  function findingCard(f, index) {
    var root = index === 0 && diagnosis.verdict !== 'healthy' && !savesNothing(f);
    var ranks = f.workers || [];
    /* The report's own figure (saves_ms, the sentence's) where it carries one. */
    var impactMs = typeof f.saves_ms === 'number' ? f.saves_ms
      : typeof f.impact === 'number' && typeof savingStepMs === 'number' ? f.impact * savingStepMs : null;
    var workerLinks = f.all_workers ? [el('b', null, 'all workers')]
      : ranks.slice(0, 12).map(function (r, i) {
          return [i ? ', ' : '', el('a', { href: '#/workers?rank=' + r, title: workerName(r) }, 'rank ' + r)];
        }).concat(ranks.length > 12 ? [' and ' + (ranks.length - 12) + ' more'] : []);
    return el('div', { className: 'panel finding' + (root ? ' root' : ''), dataset: { index: index } },
      el('div', { className: 'label' }, root ? 'Root cause' : 'Finding ' + (index + 1),
        ' ', el('span', { className: 'chip' }, CATEGORY_LABEL[f.category] || f.category || '')),
      el('p', { className: 'summary' }, PD.richText(f.summary || '')),
      el('div', { className: 'facts' },
        el('span', { className: 'impact' }, 'Impact: ', el('b', null, typeof f.impact === 'number' ? '≈' + fmt.savedPct(f.impact) + ' of step time' : '–'),
          impactMs !== null ? ' (≈' + fmt.savedMs(impactMs) + ' per step)' : ''),
        el('span', null, 'Workers: ', workerLinks),
        f.function ? el('span', null, 'Function: ', el('span', { className: 'mono', title: f.function }, PD.shortFunction(f.category, f.function, 70))) : null),
      f.evidence && f.evidence.hang ? hangTable(f.evidence.hang) : null,
      el('div', { className: 'actions' },
        el('a', { className: 'button evidence-link', href: findingHref(f, index) }, 'Evidence →'),
        heatmapColumn(f.function) >= 0 || (!f.all_workers && ranks.length) ? el('a', { className: 'button', href: '#/heatmap?finding=' + index }, 'In the heatmap') : null));
  }

  /* The findings whose fix saves nothing, folded: each sentence, and why it is not one. */
  function notWorthFixing() {
    var folded = [];
    findings.forEach(function (f, i) { if (savesNothing(f)) folded.push([f, i]); });
    return el('details', { className: 'panel not-worth', id: 'not-worth-fixing' },
      el('summary', null, 'Not worth fixing (' + folded.length + '): fixing ' + (folded.length === 1 ? 'it saves' : 'each saves') + ' no step time'),
      el('p', { className: 'muted' }, 'In the step model, removing ' + (folded.length === 1 ? 'this' : 'each of these') +
        ' alone does not shorten the step: other work sets the pace, so its time passes while the step waits for that anyway.' +
        (worthFixing.length ? ' Fix the findings above first.' : '')),
      el('ul', { className: 'plain' }, folded.map(function (p) {
        return el('li', { dataset: { index: p[1] } }, el('span', { className: 'chip' }, CATEGORY_LABEL[p[0].category] || p[0].category || ''), ' ',
          'impact ' + fmt.savedPct(p[0].impact) + ': ', PD.richText(p[0].summary || ''), ' ',
          el('a', { href: findingHref(p[0], p[1]) }, 'Evidence →'));
      })));
  }

  function verdictSentence() {
    var v = diagnosis.verdict || 'unknown', n = findings.length;
    if (v === 'healthy') {
      var of = worldSize > workersAnalyzed ? ' (of ' + worldSize + ' in the job)' : '';
      if (workersAnalyzed === 1) return 'Healthy: no bottleneck function or hang was found in the one worker analyzed' + of + '.';
      return 'Healthy: no ' + (workersAnalyzed >= 3 ? 'slow worker, ' : '') + 'bottleneck function or hang was found among the ' +
        workersAnalyzed + ' workers analyzed' + of + '.';
    }
    if (v === 'hang') return 'Hang: the job stopped making progress. ' + (n ? 'The findings below say where.' : '');
    var folded = findings.length - worthFixing.length;
    var notWorth = folded ? ' ' + folded + (folded === 1 ? ' finding saves' : ' findings save') + ' no step time (below, not worth fixing).' : '';
    n = worthFixing.length;
    if (v === 'degraded' && !n) return 'Degraded, but no finding saves step time.' + notWorth;
    if (v === 'degraded') return 'Degraded: ' + n + (n === 1 ? ' finding' : ' findings') + ', the root cause first' +
      (n > 1 && typeof diagnosis.joint_impact === 'number' ? '; fixing them all saves ≈' + fmt.savedPct(diagnosis.joint_impact) + ' of step time.' : '.') + notWorth;
    return 'Verdict: ' + v;
  }

  function renderOverview(node) {
    node.appendChild(el('h1', null, 'Diagnosis'));
    node.appendChild(el('p', { className: 'verdict ' + (diagnosis.verdict || ''), id: 'verdict' }, verdictSentence()));
    /* A partial job, or inputs of several jobs: said with the verdict, before any finding. */
    if (diagnosis.input_problem)
      node.appendChild(el('p', { className: 'input-problem ' + (diagnosis.inputs || ''), id: 'input-problem' }, diagnosis.input_problem));
    if (worthFixing.length) node.appendChild(el('div', { id: 'findings' }, findings.map(function (f, i) { return savesNothing(f) ? null : findingCard(f, i); })));
    else if (diagnosis.verdict !== 'healthy' && !findings.length) node.appendChild(el('p', { className: 'muted' }, 'The report names no finding.'));
    if (worthFixing.length < findings.length) node.appendChild(notWorthFixing());

    node.appendChild(el('h2', null, 'Job'));
    var missing = job.missing_ranks || [];
    node.appendChild(statCards([
      ['world size', String(job.world_size !== undefined ? job.world_size : '–')],
      ['workers analyzed', String(workersAnalyzed)],
      sampled ? ['ranks not in this report', missingCount + ' of ' + worldSize, 'ranks ' + rankRanges(missing) + (missingCount > missing.length ? ' …' : '')]
              : ['missing ranks', missing.length ? missing.slice(0, 8).join(', ') + (missing.length > 8 ? ' …' : '') : 'none', missing.join(', ')],
      ['steps profiled', String(job.steps !== undefined ? job.steps : '–')],
      ['median step time', fmt.ms(stepMs)]
    ]));
    if (sampled) node.appendChild(el('p', { className: 'muted', id: 'sample-note' }, sampleNote()));

    var glance = workersAtAGlance();
    if (glance) node.appendChild(el('div', { id: 'glance' }, el('h2', null, 'Workers at a glance'), glance));
    if (analyzed.length > 1) { /* one worker's steps are drawn above */
      node.appendChild(el('h2', null, 'The median worker\'s step'));
      var med = {};
      PD.BREAKDOWN.forEach(function (c) { med[c.key] = scale ? quantile(c.key, 'p50') : PD.median(workers.map(function (w) { return (w.breakdown || {})[c.key]; })); });
      node.appendChild(el('div', { className: 'panel' }, breakdownBar(med), breakdownLegend(),
        el('p', { className: 'muted' }, PD.BREAKDOWN.map(function (c) { return c.label + ' ' + fmt.ms(med[c.key]); }).join(' · '))));
    }
    node.appendChild(el('p', { className: 'muted' }, 'perftracker ' + (R.perftracker_version || '') + ' · report generated ' + (R.generated_at || '') +
      ' · the data behind this page: ', el('a', { href: 'report.json' }, 'report.json')));
  }

  /* Every rank at once: its largest excess over the median worker, hung ranks at full
   * height; one worker has nobody to be compared with, so its steps are shown instead. */
  function workersAtAGlance() {
    var h = section('Heatmap'), ranks = h && Array.isArray(h.ranks) ? h.ranks : [];
    if (scale && h && scale.nodes.length >= 2) return nodesAtAGlance(h);
    if (ranks.length >= 2) {
      var values = PD.heatmapExcess(h), hung = new Set(), marks = new Map();
      analyzed.forEach(function (w) { if (w.status === 'hang') hung.add(w.rank); });
      culprits.forEach(function (r) { marks.set(r, 'rank ' + r); });
      hung.forEach(function (r) { marks.set(r, 'rank ' + r + ': hang'); });
      var top = PD.maxOf(values, 0);
      var plot = PD.barPlot({ ranks: ranks, values: values, highlight: culprits, full: hung, marks: marks, format: fmt.pct, floor: 0.05,
        label: 'largest excess per rank', xTitle: 'rank', yTitle: 'excess, % of step',
        note: !hung.size && !culprits.size && top < 0.01 ? 'No worker stands out: every rank is within ' + fmt.pct(top) + ' of the median worker in every function' : null,
        onClick: function (r) { location.hash = '#/workers?rank=' + r; } });
      plot.node.style.height = '210px';
      return [el('p', { className: 'muted' }, 'Each bar is a rank (x axis): its largest excess over the median worker in any one function outside communication, as a share of step time (y axis). Workers that wait for a straggler spend longer in collectives, so a worker is judged by what it does instead of waiting. A slow or faulty worker stands out as a tall bar; red: named in a finding', hung.size ? ', or hung (full height)' : '', '. Click a bar to open the worker.'),
              later(plot)];
    }
    if (analyzed.length === 1) {
      var w = analyzed[0], steps = w.steps || [];
      var longest = PD.maxOf(steps.map(function (st) { return st.ms || 0; }), w.step_time_ms || 0);
      return [el('p', { className: 'muted' }, 'One worker (rank ' + w.rank + '): there is no other worker to compare it with, so here are its profiled steps, each split into exposed time by class.'),
              el('div', { className: 'panel one-worker' }, (steps.length ? steps : [Object.assign({ step: '–', ms: w.step_time_ms }, w.breakdown || {})]).map(function (st) {
                return el('div', { className: 'glance-step' }, el('span', { className: 'glance-label' }, 'step ' + st.step),
                  el('div', { className: 'glance-bar', style: { width: 'calc((100% - 170px) * ' + ((st.ms || 0) / (longest || 1)).toFixed(4) + ')' } }, breakdownBar(st, st.ms)),
                  el('span', { className: 'glance-ms' }, fmt.ms(st.ms)));
              }), breakdownLegend())];
    }
    return null;
  }

  /* The bounded form: a bar per node (by its lowest rank), its largest excess; the nodes of
   * the ranks a finding names in red. */
  function nodesAtAGlance(h) {
    var nodes = PD.scaleNodes(scale, h), first = nodes.map(function (n) { return n.ranks.length ? n.ranks[0] : -1; });
    var values = PD.heatmapExcess({ functions: h.functions, ranks: first, values: nodes.map(function (n) { return n.values; }) });
    var marked = new Set(), marks = new Map();
    nodes.forEach(function (n, i) {
      var named = n.ranks.filter(function (r) { return culprits.has(r); });
      if (named.length) { marked.add(first[i]); marks.set(first[i], 'rank ' + named[0] + (named.length > 1 ? ' +' + (named.length - 1) : '')); }
    });
    var plot = PD.barPlot({ ranks: first, values: values, highlight: marked, marks: marks, format: fmt.pct, floor: 0.05,
      label: 'largest excess per node', xTitle: 'node, by its lowest rank', yTitle: 'excess, % of step',
      onClick: function (r) { location.hash = '#/heatmap?rank=' + r; } });
    plot.node.style.height = '210px';
    return [el('p', { className: 'muted' }, 'Each bar is a node (' + nodes.length + ' nodes, x axis by their lowest rank): the largest excess of any of its workers over the median worker in any one function outside communication, as a share of step time. A node with a slow or faulty worker stands out; red: a node holding a worker named in a finding. Click a bar to open the node in the heatmap.'),
            later(plot)];
  }

  return { render: renderOverview };
};
