/* app.js -- PerfDisplay: the report (window.PT_REPORT, from data.js) as a page. A diff
 * (`perftracker diff`) arrives the same way and is drawn by diff.js.
 *
 * Design: a static single page with hash routes (#/<view>?key=..&finding=..), so links
 * work from file:// and from both servers, and the back button works. Each route renders
 * its view from the report when it is opened (nothing is built for views never opened);
 * tables and the heatmap draw only what is in view (table.js, plots.js), so a report of
 * 4096 workers costs about what one of 8 does. The diagnosis comes first: the verdict, then
 * the findings in plain sentences, root cause first, each one click from its evidence (the
 * section and key the finding names, highlighted there). One figure per quantity: a card's
 * saving is its sentence's, a figure called a median is over every worker, and a finding
 * that saves nothing is folded under "Not worth fixing". Every section view shows the
 * seed's own field names and a short "how to read this". Report strings reach the page as
 * text only (dom.js). Charts use ECharts when the build bundled it; without it, the page
 * says so and everything but the chart library's plots still works. A report in the bounded
 * form (above 4096 workers, docs/report-schema.md) lists every worker from its worker table
 * and loads a worker's or a node's detail from its part when opened (scale.js).
 *
 * Files: app.js holds the report's index, the pieces every view shares, the navigation and
 * hash routes, and start(). Each view is drawn by its own file, loaded before this one:
 * view_overview.js, view_workers.js, view_timeline.js, view_heatmap.js, view_sections.js
 * (the seed's five sections), view_hardware.js and view_inputs.js (warnings, raw traces);
 * evidence.js draws the Evidence panel atop the view a finding links to. Each registers a
 * function (PD.views.<name>, PD.evidence) that this file calls once with ctx, the report's
 * index and the shared pieces, and that returns its renderers; a view is drawn only when
 * its route is opened.
 */
'use strict';
(function () {
  var PD = window.PD, el = PD.el, fmt = PD.fmt;
  var R = window.PT_REPORT;
  var main = document.getElementById('main');
  /* The open view's charts and the parts drawn once in the document: emptied in place on
   * each route, never replaced, since the views hold them through ctx. */
  var charts = [], mounted = [];

  if (!R || typeof R !== 'object') {
    main.replaceChildren(el('p', { className: 'error' },
      'No report data: data.js is missing or damaged. PerfDisplay folders are written by ',
      el('code', null, 'perftracker analyze -o OUT'), '.'));
    return;
  }
  if (R.diff_version !== undefined) { PD.renderDiff(R); return; } /* a diff: diff.js draws it */

  /* The report, indexed ------------------------------------------------------------ */
  var job = R.job || {}, diagnosis = R.diagnosis || {}, findings = diagnosis.findings || [];
  var workers = Array.isArray(R.workers) ? R.workers : [];
  /* The bounded form (docs/report-schema.md, above 4096 workers): "workers" holds only the
   * workers in full detail; every analysed worker is a row of scale.worker_table, its node
   * a row of scale.nodes, its full detail in a part loaded when it is opened. */
  var scale = PD.boundedScale(R);
  var tableWorkers = scale ? PD.workerTableRows(scale, workers) : null;
  var byRank = new Map(), byName = new Map();
  (tableWorkers || workers).forEach(function (w) { byRank.set(w.rank, w); if (w.name) byName.set(w.name, w); });
  /* A finding whose fix saves nothing (impact under 0.05%, "0.0%" at the terminal's one
   * decimal: in the step model another worker's work then sets the pace) is no finding to
   * act on: it is folded under "Not worth fixing" with its reason and marks no worker. A
   * hang, a lost rank and a report with no worker analysed are no savings: always shown. */
  var NOTHING_SAVED = 0.0005;
  function savesNothing(f) {
    return typeof f.impact === 'number' && f.impact < NOTHING_SAVED && f.category !== 'hang' && f.category !== 'lost' &&
      (f.workers || []).length > 0;
  }
  var worthFixing = findings.filter(function (f) { return !savesNothing(f); });
  var culprits = new Set();
  worthFixing.forEach(function (f) { if (!f.all_workers) (f.workers || []).forEach(function (r) { culprits.add(r); }); });
  var culpritNames = new Set(Array.from(culprits).map(function (r) { return byRank.has(r) ? byRank.get(r).name : null; }));
  var hasCharts = typeof window.echarts !== 'undefined';
  var stepMs = job.median_step_time_ms;
  /* A finding's saving in ms is its impact times the step model's step, as its sentence
   * computes it (diagnosis.step_model.step_ms), so the card and the sentence give one figure. */
  var stepModel = diagnosis.step_model || {};
  var savingStepMs = typeof stepModel.step_ms === 'number' && stepModel.step_ms > 0 ? stepModel.step_ms : stepMs;
  /* Ranks of the job with no trace in the report. When they outnumber the ranks it holds,
   * the traces are a sample (rank 0 of 128, the usual profiler dump), not a job that lost
   * most of its workers: those ranks are counted, not listed as failures. */
  var analyzed = workers.filter(function (w) { return w.status !== 'missing'; });
  var analyzedCount = tableWorkers ? tableWorkers.length : analyzed.length;
  var missingCount = typeof job.missing_count === 'number' ? job.missing_count : workers.length - analyzed.length;
  var sampled = missingCount > 0 && missingCount > analyzedCount;
  var listedWorkers = tableWorkers ? (sampled ? tableWorkers : PD.withUnanalyzed(tableWorkers, workers)) : sampled ? analyzed : workers;
  var worldSize = typeof job.world_size === 'number' ? job.world_size : workers.length;
  var workersAnalyzed = typeof job.workers_analyzed === 'number' ? job.workers_analyzed : analyzedCount;

  function workerName(rank) { var w = byRank.get(rank); return w && w.name ? w.name : 'rank ' + rank; }
  /* A rank's node: its host, as the report names it (null: unknown). */
  function nodeOf(rank) { var w = byRank.get(rank); return w && typeof w.host === 'string' && w.host ? w.host : null; }
  function rankOf(name) { var w = byName.get(name); return w ? w.rank : null; }
  function section(name) { var s = R[name]; return s && typeof s === 'object' ? s : null; }
  function entries(obj) { return obj && typeof obj === 'object' ? Object.keys(obj).map(function (k) { return [k, obj[k]]; }) : []; }

  /* The views' context --------------------------------------------------------------- */
  /* What app.js gives every view file (view_*.js) and evidence.js: the report and its index,
   * and the shared pieces below. They read it; charts and mounted they push to. */
  var ctx = {
    R: R, job: job, diagnosis: diagnosis, findings: findings, workers: workers, analyzed: analyzed,
    listedWorkers: listedWorkers, scale: scale, byRank: byRank, culprits: culprits, culpritNames: culpritNames,
    worthFixing: worthFixing, savingStepMs: savingStepMs, stepMs: stepMs, missingCount: missingCount,
    sampled: sampled, worldSize: worldSize, workersAnalyzed: workersAnalyzed, hasCharts: hasCharts,
    charts: charts, mounted: mounted,
    savesNothing: savesNothing, section: section, entries: entries, workerName: workerName, nodeOf: nodeOf,
    workerCell: workerCell, rankText: rankText, kernelCell: kernelCell, ratioBar: ratioBar, statCards: statCards,
    table: table, matchKey: matchKey, heading: heading, viewWidth: viewWidth, later: later, chartBox: chartBox,
    chartPart: chartPart, breakdownBar: breakdownBar, breakdownLegend: breakdownLegend, findingHref: findingHref,
    categoryView: categoryView, heatmapColumn: heatmapColumn, quantile: quantile, rankRanges: rankRanges,
    sampleNote: sampleNote, rawTraceLink: rawTraceLink, rankParam: rankParam, findingParam: findingParam
  };
  var evidence = PD.evidence(ctx);
  ctx.hangTable = evidence.hangTable; /* a hang finding's card, in the Overview, has it too */

  /* Views ----------------------------------------------------------------------------- */
  var overview = PD.views.overview(ctx), workersView = PD.views.workers(ctx), timeline = PD.views.timeline(ctx),
      heatmap = PD.views.heatmap(ctx), sections = PD.views.sections(ctx), hardware = PD.views.hardware(ctx),
      inputs = PD.views.inputs(ctx);
  var VIEWS = [
    { id: 'overview', title: 'Overview', render: overview.render },
    { id: 'workers', title: 'Workers', render: workersView.render, count: function () { return listedWorkers.length; } },
    { id: 'timeline', title: 'Step timeline', render: timeline.render, optional: function () { return !timeline.rows().length; } },
    { id: 'heatmap', title: 'Heatmap', section: 'Heatmap', render: heatmap.render },
    { id: 'gpu-compute', title: 'GPU Compute', section: 'GPU Compute', render: sections.gpuCompute,
      bad: function (s) { return (s['workers with potential GPU issues'] || []).length + entries(s['workers with abnormal GPU utilization']).length; } },
    { id: 'gpu-memory', title: 'GPU memory operations', section: 'GPU memory operations', render: sections.gpuMemory,
      bad: function (s) { return entries(s).filter(function (e) { return entries(e[1].abnormal_workers).length; }).length; } },
    { id: 'communication', title: 'Communication', section: 'Communication', render: sections.communication,
      bad: function () { return sections.communicationRows().filter(function (r) { return r.abnormal.length; }).length; } },
    { id: 'cuda-runtime', title: 'CUDA Runtime', section: 'CUDA Runtime', render: sections.cudaRuntime,
      bad: function (s) { return entries(s).filter(function (e) { return entries(e[1].abnormal_workers).length; }).length; } },
    { id: 'python', title: 'Python functions', section: 'Python functions', render: sections.python,
      count: function () { return entries(section('Python functions')).length; } },
    { id: 'hardware', title: 'Hardware', section: 'Hardware', render: hardware.render, optional: true },
    { id: 'warnings', title: 'Warnings', render: inputs.warnings,
      count: function () { return (R.warnings || []).length; }, optional: function () { return !(R.warnings || []).length; } },
    { id: 'traces', title: 'Raw traces', render: inputs.traces,
      optional: function () { return !workers.some(function (w) { return w.raw_trace; }); } }
  ];
  var SECTION_VIEW = { 'workers': 'workers', 'job': 'overview', 'diagnosis': 'overview' };
  VIEWS.forEach(function (v) { if (v.section) SECTION_VIEW[v.section] = v.id; });

  /* A section with nothing in it (the GPU views of a CPU-only job): no verdict to give. */
  function sectionEmpty(id, s) {
    if (id === 'gpu-compute') {
      var util = s['min/median/max GPU utilization (in [0,1])'] || [];
      return !entries(s.major_kernel_executions).length && !(util[2] > 0);
    }
    if (id === 'communication') return !sections.communicationRows().length;
    return !entries(s).length;
  }
  var EMPTY_SECTION = {
    'gpu-compute': 'No GPU kernel ran in the profiled window: a CPU-only job (or a trace without GPU activity). Nothing to show here.',
    'gpu-memory': 'No GPU memory operation (copy or memset) in the profiled window.',
    'communication': 'No collective in the profiled window: the workers did not communicate (a single worker, or a job without a process group).',
    'cuda-runtime': 'No CUDA runtime call in the profiled window: a CPU-only job (or a trace without GPU activity).'
  };

  function viewAvailable(v) {
    if (typeof v.optional === 'function') return !v.optional();
    return !v.optional || !!section(v.section);
  }

  function buildNav() {
    var nav = document.getElementById('nav');
    VIEWS.filter(viewAvailable).forEach(function (v) {
      var count = null, s = v.section ? section(v.section) : null;
      if (v.bad && s && sectionEmpty(v.id, s)) count = el('span', { className: 'count', title: 'nothing recorded in this job' }, '–');
      else if (v.bad && s) { var n = v.bad(s); count = el('span', { className: 'count' + (n ? ' bad' : ''), title: n ? n + ' with abnormal workers' : 'nothing abnormal' }, n ? String(n) : '✓'); }
      else if (v.count) count = el('span', { className: 'count' }, String(v.count()));
      else if (v.section && !s) count = el('span', { className: 'count' }, '–');
      nav.appendChild(el('a', { href: '#/' + v.id, dataset: { view: v.id } }, el('span', null, v.title), count));
    });
  }

  function route() {
    var hash = location.hash.replace(/^#\/?/, ''), q = hash.indexOf('?');
    var id = q >= 0 ? hash.slice(0, q) : hash, params = new URLSearchParams(q >= 0 ? hash.slice(q + 1) : '');
    var view = VIEWS.filter(viewAvailable).find(function (v) { return v.id === id; }) || VIEWS[0];
    charts.forEach(function (c) { c.dispose(); });
    mounted.forEach(function (m) { if (m.destroy) m.destroy(); });
    charts.length = 0; mounted.length = 0;
    PD.tooltip.hide();
    var node = el('section', { className: 'view', id: 'view-' + view.id, dataset: { view: view.id } });
    var findingIndex = findingParam(params);
    if (findingIndex >= 0 && findings[findingIndex] && view.id !== 'overview') node.appendChild(evidence.panel(findings[findingIndex], findingIndex));
    if (view.section && !section(view.section)) {
      node.appendChild(el('h1', null, view.title));
      node.appendChild(el('p', { className: 'muted' }, 'This report has no "' + view.section + '" section.'));
    } else if (EMPTY_SECTION[view.id] && sectionEmpty(view.id, section(view.section))) {
      node.appendChild(el('h1', null, view.title));
      node.appendChild(el('p', { className: 'muted', id: 'empty-section' }, EMPTY_SECTION[view.id]));
    } else {
      view.render(node, params);
    }
    if (scale && view.section) truncationNote(node, view.section);
    main.replaceChildren(node);
    document.querySelectorAll('#nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.view === view.id); });
    mounted.forEach(function (m) { if (m.mount) m.mount(); });
    if (!params.has('key') && !params.has('rank') && !params.has('finding')) window.scrollTo(0, 0);
    main.focus({ preventScroll: true });
  }

  /* The bounded form cuts a section's per-worker maps to the most extreme entries
   * (scale.truncated): the view says so under its how-to, with how many there were. */
  function truncationNote(node, sectionName) {
    var cuts = (Array.isArray(scale.truncated) ? scale.truncated : []).filter(function (t) { return t && t.section === sectionName; });
    if (!cuts.length) return;
    var note = el('div', { className: 'notice', id: 'truncated' },
      el('p', null, 'This job has ' + listedWorkers.length + ' workers: report.json lists only the most extreme entries of these lists (the Workers view has every worker):'),
      el('ul', { className: 'plain' }, cuts.slice(0, 12).map(function (t) {
        return el('li', null, (t.key ? el('span', { className: 'mono', title: t.key }, PD.shortFunction(null, t.key, 60)) : ''), t.key ? ' · ' : '',
          (t.field || 'workers') + ': ' + t.listed + ' of ' + t.count);
      }), cuts.length > 12 ? el('li', null, 'and ' + (cuts.length - 12) + ' more') : null));
    var howto = node.querySelector('details.howto');
    if (howto) howto.after(note); else node.appendChild(note);
  }

  /* The width a view has: the main column's, less its padding (the navigation is beside it
   * on a wide window, above it on a narrow one: style.css). */
  function viewWidth() {
    var cs = getComputedStyle(main);
    return (main.clientWidth || window.innerWidth) - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0);
  }

  /* Registers something drawn once it is in the document (canvas sizes, charts). */
  function later(part) { mounted.push(part); return part.node; }

  /* Shared pieces --------------------------------------------------------------------- */
  /* A page's title, then how to read it. */
  function heading(node, title, intro, fields) {
    node.appendChild(el('h1', null, title));
    node.appendChild(howTo(intro, fields));
  }

  function howTo(intro, fields) {
    return el('details', { className: 'howto', attrs: { open: '' } },
      el('summary', null, 'How to read this'),
      el('p', null, intro),
      fields && fields.length ? el('dl', null, fields.map(function (f) { return [el('dt', null, f[0]), el('dd', null, f[1])]; })) : null);
  }

  function workerCell(name) {
    var rank = rankOf(name);
    return el('a', { href: '#/workers?rank=' + (rank === null ? '' : rank), title: name,
                     className: culpritNames.has(name) ? 'status-slow' : '' }, name);
  }
  function rankText(name) { var r = rankOf(name); return r === null ? '' : r; }

  function kernelCell(key) { return el('span', { title: key, className: 'mono' }, PD.shortKernelKey(key)); }

  function ratioBar(ratio, max) {
    var w = max > 0 && typeof ratio === 'number' ? Math.max(1, Math.round(60 * ratio / max)) : 0;
    return el('span', null, el('span', { className: 'bar', style: { width: w + 'px' } }), fmt.pct(ratio));
  }

  function statCards(items) {
    return el('div', { className: 'stats' }, items.map(function (it) {
      return el('div', { className: 'stat', title: it[2] || it[0] }, el('div', { className: 'v' }, it[1]), el('div', { className: 'k' }, it[0]));
    }));
  }

  function table(options) {
    var t = new PD.Table(options);
    if (options.highlight) t.highlight(options.highlight);
    return t.node;
  }

  function matchKey(params) {
    var key = params.get('key');
    return key === null ? null : key;
  }

  /* A chart from the bundled library, drawn once its box is in the document. */
  function chartPart(height, makeOption) {
    var node = el('div', { className: 'chart', style: { height: height + 'px' } });
    return {
      node: node,
      mount: function () {
        if (!hasCharts) {
          node.style.height = 'auto';
          node.replaceChildren(el('p', { className: 'muted' }, 'Chart not available: the chart library was not bundled with this PerfDisplay. The table shows the same numbers.'));
          return;
        }
        var chart = window.echarts.init(node, null, { renderer: 'canvas' });
        chart.setOption(makeOption());
        charts.push(chart);
      }
    };
  }
  function chartBox(height, makeOption) { return later(chartPart(height, makeOption)); }
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });

  function breakdownLegend() {
    return el('div', { className: 'legend' }, PD.BREAKDOWN.map(function (b) {
      return el('span', null, el('i', { style: { background: b.color } }), b.label);
    }));
  }

  function breakdownBar(b, total) {
    total = total || PD.BREAKDOWN.reduce(function (s, c) { return s + (b[c.key] || 0); }, 0);
    return el('div', { className: 'stack', title: PD.BREAKDOWN.map(function (c) { return c.label + ': ' + fmt.ms(b[c.key]); }).join('\n') },
      PD.BREAKDOWN.map(function (c) {
        var v = b[c.key] || 0;
        return v > 0 && total > 0 ? el('span', { style: { width: (100 * v / total) + '%', background: c.color } }) : null;
      }));
  }

  function findingHref(f, index) {
    var ev = f.evidence || {}, view = SECTION_VIEW[ev.section] || categoryView(f.category);
    var href = '#/' + view + '?finding=' + index;
    if (ev.key || f.function) href += '&key=' + encodeURIComponent(ev.key || f.function);
    return href;
  }
  function categoryView(category) {
    return { gpu_compute: 'gpu-compute', gpu_memory: 'gpu-memory', communication: 'communication',
             cuda_runtime: 'cuda-runtime', python: 'python', cpu_bound: 'python', hardware: 'hardware', hang: 'workers', host: 'workers' }[category] || 'overview';
  }

  function heatmapColumn(fnName) {
    var h = section('Heatmap');
    if (!h || !fnName) return -1;
    return (h.functions || []).findIndex(function (f) { return f.name === fnName; });
  }

  /* The bounded form's distribution of metric over every worker (scale.distributions). */
  function quantile(metric, q) {
    var d = scale && scale.distributions && scale.distributions[metric];
    return d && d.quantiles && typeof d.quantiles[q] === 'number' ? d.quantiles[q] : null;
  }

  /* "1-5, 9, 12-127": a list of ranks, short. */
  function rankRanges(ranks) {
    var out = [], i = 0;
    while (i < ranks.length) {
      var j = i;
      while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
      out.push(j > i ? ranks[i] + '–' + ranks[j] : String(ranks[i]));
      i = j + 1;
    }
    return out.join(', ');
  }
  function sampleNote() {
    var held = analyzed.map(function (w) { return w.rank; }).filter(function (r) { return r >= 0; });
    return 'This report holds ' + analyzed.length + ' of the job\'s ' + worldSize + ' ranks (' + (held.length === 1 ? 'rank ' : 'ranks ') +
      rankRanges(held) + '): a sample, the other ranks\' traces were not given. Findings compare only the ranks it holds.';
  }

  function rawTraceLink(path, shown) {
    /* Raw traces sit beside PerfDisplay/ (<out>/raw_trace/); both servers map /raw_trace/ there. */
    var href = location.protocol === 'file:' ? '../' + path : path;
    return el('a', { href: href, className: 'mono', title: path }, shown || path);
  }

  /* The route's ?rank= (null: none) and ?finding= (-1: none). */
  function rankParam(params) { return params.has('rank') && params.get('rank') !== '' ? Number(params.get('rank')) : null; }
  function findingParam(params) { return params.has('finding') ? Number(params.get('finding')) : -1; }

  /* Start ------------------------------------------------------------------------------------- */
  function start() {
    document.getElementById('job-line').textContent =
      (workersAnalyzed < worldSize ? workersAnalyzed + ' of ' + worldSize + ' workers'
                                   : worldSize + (worldSize === 1 ? ' worker' : ' workers')) +
      (typeof stepMs === 'number' ? ' · median step ' + fmt.ms(stepMs) : '') +
      (R.generated_at ? ' · ' + R.generated_at : '');
    var badge = document.getElementById('verdict-badge');
    badge.textContent = diagnosis.verdict || 'no verdict';
    badge.className = 'badge ' + (diagnosis.verdict || '');
    if (!hasCharts) {
      document.getElementById('notices').appendChild(el('p', { className: 'notice', id: 'no-charts' },
        'Charts were not bundled with this PerfDisplay (npm was not available when perftracker was built). ' +
        'The diagnosis, tables, heatmap and step plots work without them.'));
    }
    buildNav();
    window.addEventListener('hashchange', route);
    route();
    document.body.dataset.ready = 'true'; /* the page has drawn its first view */
  }
  start();
})();
