/* diff.js -- PerfDisplay for a diff (`perftracker diff BEFORE AFTER`, docs/diff-schema.md).
 *
 * Design: the same static page as a report (index.html, data.js); app.js hands the data
 * here when it carries "diff_version". Hash routes (#/<view>) as in app.js, each view built
 * when opened: the verdict with the step and class figures of both runs (each change with
 * whether it counts and by which rule, so none sits beside a larger threshold unexplained),
 * the functions whose time per step changed beyond noise, those added and removed, the
 * findings each run's diagnosis gained or lost (those that save nothing folded), and the
 * notes saying what the comparison could not see.
 * Every name from the diff (kernel names hold '<', '>' and '&') reaches the page as text
 * through PD.el (dom.js), never as markup.
 */
'use strict';
(function () {
  var PD = (window.PD = window.PD || {});

  PD.renderDiff = function (D) {
    var el = PD.el, fmt = PD.fmt;
    var main = document.getElementById('main');
    var before = D.before || {}, after = D.after || {}, verdict = D.verdict || {};
    var functions = Array.isArray(D.functions) ? D.functions : [];
    var added = Array.isArray(D.added) ? D.added : [], removed = Array.isArray(D.removed) ? D.removed : [];
    var classes = Array.isArray(D.classes) ? D.classes : [];
    var findings = D.findings || {};
    var mounted = [];

    var CLASS_LABEL = { compute: 'GPU compute', memory: 'GPU memory', communication: 'communication',
                        runtime: 'CUDA runtime', python: 'Python', idle: 'idle' };
    var CATEGORY = { compute: 'gpu_compute', memory: 'gpu_memory', communication: 'communication',
                     runtime: 'cuda_runtime', python: 'python' };
    var CLASS_COLOR = {};
    PD.BREAKDOWN.forEach(function (b) { CLASS_COLOR[b.key.replace(/_ms$/, '')] = b.color; });

    function list(x) { return Array.isArray(x) ? x : []; }
    function signedMs(v) {
      if (typeof v !== 'number' || !isFinite(v)) return '–';
      return (v > 0 ? '+' : v < 0 ? '−' : '±') + fmt.ms(Math.abs(v));
    }
    function signedPct(p) {
      if (typeof p !== 'number' || !isFinite(p)) return '–';
      return (p > 0 ? '+' : p < 0 ? '−' : '±') + (Math.abs(p) >= 1000 ? Math.round(Math.abs(p)) : Number(Math.abs(p).toPrecision(3))) + '%';
    }
    function calls(v) { return typeof v === 'number' && isFinite(v) ? fmt.num(v) : '–'; }
    function changeClass(c) {
      if (!c || !c.significant) return 'unchanged';
      return c.delta_ms > 0 ? 'worse' : 'better';
    }
    /* Why a change counts or not, by diff.json's rules (docs/diff-schema.md, "Noise"): beyond
     * its threshold (3 standard errors of the difference, or 1% of the step, the larger), or,
     * for the step time only, within it while every profiled step of one run is longer than
     * every step of the other (each run four steps at least): the one way "significant" is
     * true with |delta_ms| <= threshold_ms. The page says which, so a change marked as
     * counting never sits beside a larger threshold unexplained. */
    function judged(c, isStep) {
      var beyond = typeof c.delta_ms === 'number' && typeof c.threshold_ms === 'number' && Math.abs(c.delta_ms) > c.threshold_ms;
      if (!c.significant && beyond) return { counts: false, why: 'not counted', text: 'beyond the ±' + fmt.ms(c.threshold_ms) + ' noise threshold, yet not counted by diff.json (no rule this page knows)' };
      if (!c.significant) return { counts: false, why: 'within noise', text: 'within the ±' + fmt.ms(c.threshold_ms) + ' noise threshold' };
      var apart = c.counted_by === 'steps_apart' || (c.counted_by === undefined && !beyond && isStep);
      if (c.counted_by === 'noise' || (beyond && !apart)) return { counts: true, why: 'beyond noise', text: 'beyond the ±' + fmt.ms(c.threshold_ms) + ' noise threshold' };
      if (apart) return { counts: true, why: 'steps apart', text: 'within the ±' + fmt.ms(c.threshold_ms) + ' noise threshold, but every profiled step of ' +
        (c.delta_ms > 0 ? 'AFTER is longer than every step of BEFORE' : 'AFTER is shorter than every step of BEFORE') + ': a separation that needs no noise model' };
      return { counts: true, why: 'marked significant', text: 'marked significant by diff.json (no rule this page knows puts it within the ±' + fmt.ms(c.threshold_ms) + ' threshold)' };
    }
    function fnName(f, max) {
      return el('span', { className: 'mono', title: f.name }, PD.shortFunction(CATEGORY[f.class] || f.class, f.name, max || 80));
    }
    function rankText(f) {
      var ranks = list(f.ranks);
      if (!ranks.length) return '';
      var shown = ranks.slice(0, 3).map(function (r) { return 'rank ' + r.rank + ' ' + signedMs(r.delta_ms); });
      var more = (f.ranks_standing_out || ranks.length) - shown.length;
      return shown.join(', ') + (more > 0 ? ' and ' + more + ' more' : '');
    }
    function howTo(intro, fields) {
      return el('details', { className: 'howto', attrs: { open: '' } },
        el('summary', null, 'How to read this'),
        el('p', null, intro),
        fields && fields.length ? el('dl', null, fields.map(function (f) { return [el('dt', null, f[0]), el('dd', null, f[1])]; })) : null);
    }
    function table(options) { var t = new PD.Table(options); return t.node; }

    /* Views ------------------------------------------------------------------------ */
    var VIEWS = [
      { id: 'overview', title: 'Overview', render: renderOverview },
      { id: 'functions', title: 'Changed functions', render: renderFunctions, count: function () { return D.functions_changed || functions.length; } },
      { id: 'added', title: 'Added', render: function (n) { renderListed(n, 'added'); }, count: function () { return D.added_count || added.length; } },
      { id: 'removed', title: 'Removed', render: function (n) { renderListed(n, 'removed'); }, count: function () { return D.removed_count || removed.length; } },
      { id: 'findings', title: 'Findings', render: renderFindings,
        count: function () { return list(findings.new).concat(list(findings.resolved)).filter(function (f) { return !savesNothing(f); }).length; } },
      { id: 'notes', title: 'Notes', render: renderNotes, count: function () { return list(D.notes).length + list(D.warnings).length; } }
    ];

    function buildNav() {
      var nav = document.getElementById('nav');
      VIEWS.forEach(function (v) {
        nav.appendChild(el('a', { href: '#/' + v.id, dataset: { view: v.id } }, el('span', null, v.title),
          v.count ? el('span', { className: 'count' }, String(v.count())) : null));
      });
    }

    function route() {
      var id = location.hash.replace(/^#\/?/, '').split('?')[0];
      var view = VIEWS.find(function (v) { return v.id === id; }) || VIEWS[0];
      mounted.forEach(function (m) { if (m.destroy) m.destroy(); });
      mounted = [];
      var node = el('section', { className: 'view', id: 'view-' + view.id, dataset: { view: view.id } });
      view.render(node);
      main.replaceChildren(node);
      document.querySelectorAll('#nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.view === view.id); });
      window.scrollTo(0, 0);
      main.focus({ preventScroll: true });
    }

    /* Overview --------------------------------------------------------------------- */
    function runCard(label, r) {
      return el('div', { className: 'panel run' },
        el('div', { className: 'label muted' }, label),
        el('p', { className: 'mono', title: r.input || '' }, r.input || ''),
        el('p', { className: 'muted' }, [
          (r.workers !== undefined ? r.workers + (r.workers === 1 ? ' worker' : ' workers') : ''),
          r.source ? ' · from ' + r.source : '',
          r.steps !== undefined && r.steps !== null ? ' · ' + fmt.num(r.steps) + ' steps' : '',
          list(r.devices).length ? ' · ' + list(r.devices).join(', ') : '',
          ' · its diagnosis: ' + (r.verdict || 'unknown')].join('')));
    }

    function stackBar(label, key) {
      var parts = classes.map(function (c) { return { cls: c.class, v: c[key] || 0 }; });
      var total = parts.reduce(function (s, p) { return s + p.v; }, 0);
      var scale = Math.max((D.step_time || {}).before_ms || 0, (D.step_time || {}).after_ms || 0, total) || 1;
      return el('div', { className: 'diff-stack-row' },
        el('span', { className: 'diff-stack-label' }, label),
        el('div', { className: 'stack diff-stack', style: { width: (100 * total / scale) + '%' },
                    title: parts.map(function (p) { return (CLASS_LABEL[p.cls] || p.cls) + ': ' + fmt.ms(p.v); }).join('\n') },
          parts.map(function (p) {
            return p.v > 0 && total > 0 ? el('span', { style: { width: (100 * p.v / total) + '%', background: CLASS_COLOR[p.cls] || '#999' } }) : null;
          })),
        el('span', { className: 'muted' }, fmt.ms(total)));
    }

    function figureRow(label, c) {
      return { label: label, c: c || {} };
    }

    function renderOverview(node) {
      node.appendChild(el('h1', null, 'What changed'));
      node.appendChild(el('p', { className: 'verdict diff-' + (verdict.change || 'unknown'), id: 'diff-verdict' }, verdict.sentence || 'No verdict.'));
      node.appendChild(el('div', { className: 'runs' }, runCard('Before', before), runCard('After', after)));
      var st = D.step_time || {};
      node.appendChild(el('div', { className: 'stats' },
        [['step time before', fmt.ms(st.before_ms)], ['step time after', fmt.ms(st.after_ms)],
         ['change', signedMs(st.delta_ms) + ' (' + signedPct(st.delta_pct) + ')'],
         ['noise threshold', '±' + fmt.ms(st.threshold_ms)]].map(function (it) {
          return el('div', { className: 'stat' }, el('div', { className: 'v' }, it[1]), el('div', { className: 'k' }, it[0]));
        })));
      var stepJudged = judged(st, true);
      node.appendChild(el('p', { id: 'step-significance', className: 'muted', dataset: { counts: String(stepJudged.counts), why: stepJudged.why } },
        'The step time\'s change ' + (stepJudged.counts ? 'counts' : 'does not count') + ': ' + signedMs(st.delta_ms) + ' is ' + stepJudged.text + '.'));
      node.appendChild(el('h2', null, 'Exposed time per step, by class'));
      node.appendChild(howTo('The step of the median worker, split by what the GPU and CPU were doing, in priority order (GPU compute first, then memory operations, communication, CUDA runtime, Python, and idle for the rest), so the parts add up to the step time. A change counts (bold, coloured) only when it is beyond the runs\' step-to-step noise and at least 1% of the step time. ' + (D.comparison === 'rank by rank' ? 'Both runs have the same ranks, so ranks whose change stands out from the others\' are named: a straggler makes everyone else wait in communication.' : 'The runs are compared by their median workers.'), [
        ['threshold', 'the smallest change that counts: three standard errors of the difference, or 1% of the step time, whichever is larger.'],
        ['counts', 'whether the change counts, and why: beyond noise (larger than the threshold); steps apart (the step time only: every profiled step of one run is longer than every step of the other, each run having four steps at least, however widely they spread; still at least 1% of the step); or within noise.'],
        ['ranks', 'ranks whose own change differs from the median rank\'s change beyond noise.']]));
      node.appendChild(el('div', { className: 'panel', id: 'diff-bars' }, stackBar('before', 'before_ms'), stackBar('after', 'after_ms'),
        el('div', { className: 'legend' }, classes.map(function (c) {
          return el('span', null, el('i', { style: { background: CLASS_COLOR[c.class] || '#999' } }), CLASS_LABEL[c.class] || c.class);
        }))));
      var rows = [figureRow('step time', D.step_time)].concat(classes.map(function (c) { return figureRow(CLASS_LABEL[c.class] || c.class, c); }));
      /* In a box that scrolls sideways on a window too narrow for it. */
      node.appendChild(el('div', { className: 'plain-scroll' }, el('table', { className: 'plain-table', id: 'diff-classes' },
        el('thead', null, el('tr', null, ['', 'before', 'after', 'change', '%', 'threshold', 'counts', 'ranks that stand out'].map(function (h) { return el('th', null, h); }))),
        el('tbody', null, rows.map(function (r, i) {
          var j = judged(r.c, i === 0);
          return el('tr', { className: changeClass(r.c) },
            el('td', null, r.label), el('td', { className: 'num' }, fmt.ms(r.c.before_ms)), el('td', { className: 'num' }, fmt.ms(r.c.after_ms)),
            el('td', { className: 'num delta' }, signedMs(r.c.delta_ms)), el('td', { className: 'num' }, signedPct(r.c.delta_pct)),
            el('td', { className: 'num muted' }, '±' + fmt.ms(r.c.threshold_ms)), el('td', { className: 'judged', title: j.text }, j.counts ? 'yes: ' + j.why : 'no: ' + j.why),
            el('td', null, rankText(r.c)));
        })))));
      if (functions.length) {
        node.appendChild(el('h2', null, 'Changed most'));
        node.appendChild(el('ol', { className: 'top-changes', id: 'top-changes' }, functions.slice(0, 5).map(function (f) {
          return el('li', { className: changeClass(f.significant ? f : { significant: true, delta_ms: (list(f.ranks)[0] || {}).delta_ms }) },
            el('b', null, f.significant ? signedMs(f.delta_ms) : rankText(f)), ' ',
            el('span', { className: 'chip' }, CLASS_LABEL[f.class] || f.class), ' ', fnName(f, 100));
        })));
        node.appendChild(el('p', null, el('a', { href: '#/functions' }, 'All ' + (D.functions_changed || functions.length) + ' changed functions →')));
      } else {
        node.appendChild(el('p', { className: 'muted', id: 'no-function-changes' }, 'No function\'s time per step changed beyond noise (' + (D.functions_compared || 0) + ' compared).'));
      }
      node.appendChild(el('p', { className: 'muted' }, 'perftracker ' + (D.perftracker_version || '') + ' · diff generated ' + (D.generated_at || '') +
        ' · the data behind this page: ', el('a', { href: 'diff.json' }, 'diff.json')));
    }

    /* Functions -------------------------------------------------------------------- */
    function fnColumns(extra) {
      return [
        { label: 'class', value: function (f) { return CLASS_LABEL[f.class] || f.class; }, width: '120px', whole: true },
        { label: 'function', value: function (f) { return f.name; }, render: function (f) { return fnName(f); } }
      ].concat(extra);
    }

    function renderFunctions(node) {
      node.appendChild(el('h1', null, 'Functions whose time per step changed'));
      node.appendChild(howTo('Each kernel, memory operation, collective, runtime call and Python call stack whose exposed time per step (the part not hidden by higher-priority activity) changed beyond noise on the median worker, or on ranks that stand out. Largest change first. Calls and totals are per step on the median worker; a report.json input has neither.', [
        ['before / after', 'exposed ms per step on the median worker.'],
        ['ranks', 'ranks whose own change stands out from the others\' (same ranks in both runs).'],
        ['calls', 'executions per step, before → after.']]));
      node.appendChild(table({
        rows: functions, filter: 'Filter functions', visibleRows: 18, empty: 'No function changed beyond noise.',
        rowClass: function (f) { return changeClass(f.significant ? f : { significant: true, delta_ms: (list(f.ranks)[0] || {}).delta_ms }); },
        columns: fnColumns([
          { label: 'before', value: function (f) { return f.before_ms; }, text: function (f) { return fmt.ms(f.before_ms); }, numeric: true, width: '90px' },
          { label: 'after', value: function (f) { return f.after_ms; }, text: function (f) { return fmt.ms(f.after_ms); }, numeric: true, width: '90px' },
          { label: 'change', value: function (f) { return f.delta_ms; }, text: function (f) { return f.significant ? signedMs(f.delta_ms) : '(within noise)'; }, numeric: true, width: '110px' },
          { label: '%', value: function (f) { return f.delta_pct; }, text: function (f) { return f.significant ? signedPct(f.delta_pct) : ''; }, numeric: true, width: '80px' },
          { label: 'calls', value: function (f) { return f.after_calls; }, text: function (f) { return calls(f.before_calls) + ' → ' + calls(f.after_calls); }, numeric: true, width: '110px' },
          { label: 'ranks', value: function (f) { return list(f.ranks).length; }, text: rankText, width: '200px' }])
      }));
    }

    function renderListed(node, which) {
      var rows = which === 'added' ? added : removed, key = which === 'added' ? 'after' : 'before';
      var total = which === 'added' ? D.added_count : D.removed_count;
      node.appendChild(el('h1', null, which === 'added' ? 'Functions added in AFTER' : 'Functions removed in AFTER'));
      node.appendChild(howTo(which === 'added'
        ? 'Functions that AFTER ran and BEFORE did not run on any worker (a new kernel, a new copy, a new code path). A kernel launched with other grid or block sizes is another kernel.'
        : 'Functions that BEFORE ran and AFTER no longer runs on any worker.', [
        ['time', 'exposed ms per step on the median worker; bold when it is beyond noise and at least 1% of the step.'],
        ['calls', 'executions per step on the median worker.'],
        ['workers', 'how many workers ran it.']]));
      if (total > rows.length) node.appendChild(el('p', { className: 'muted' }, 'The ' + rows.length + ' costliest of ' + total + ' are listed.'));
      node.appendChild(table({
        rows: rows, filter: 'Filter functions', visibleRows: 18, empty: which === 'added' ? 'Nothing was added.' : 'Nothing was removed.',
        rowClass: function (f) { return f.significant ? (which === 'added' ? 'worse' : 'better') : 'unchanged'; },
        columns: fnColumns([
          { label: 'time', value: function (f) { return f[key + '_ms']; }, text: function (f) { return fmt.ms(f[key + '_ms']); }, numeric: true, width: '100px' },
          { label: 'calls', value: function (f) { return f[key + '_calls']; }, text: function (f) { return calls(f[key + '_calls']); }, numeric: true, width: '90px' },
          { label: 'workers', value: function (f) { return f[key + '_workers']; }, numeric: true, width: '80px' },
          { label: 'ms per call', value: function (f) { return f[key + '_ms_per_call']; }, text: function (f) { return fmt.ms(f[key + '_ms_per_call']); }, numeric: true, width: '100px' }])
      }));
    }

    /* Findings, notes -------------------------------------------------------------- */
    /* A finding whose fix saves nothing (impact under 0.05%) is folded, as on a report's page. */
    function savesNothing(f) {
      return typeof f.impact === 'number' && f.impact < 0.0005 && f.category !== 'hang' && f.category !== 'lost' && list(f.workers).length > 0;
    }
    function findingCard(f) {
      return el('div', { className: 'panel finding' },
        el('div', { className: 'label' }, el('span', { className: 'chip' }, f.category || ''),
          f.all_workers ? ' all workers' : list(f.workers).length ? ' ranks ' + list(f.workers).join(', ') : '',
          typeof f.impact === 'number' ? ' · impact ≈' + fmt.savedPct(f.impact) + ' of step time' : ''),
        el('p', { className: 'summary' }, f.summary || ''));
    }
    function findingList(title, items, id) {
      var shown = items.filter(function (f) { return !savesNothing(f); }), folded = items.filter(savesNothing);
      return [el('h2', null, title + ' (' + shown.length + ')'),
        shown.length ? el('div', { id: id }, shown.map(findingCard)) : el('p', { className: 'muted' }, 'None.'),
        folded.length ? el('details', { className: 'panel not-worth', id: id + '-not-worth' },
          el('summary', null, 'Not worth fixing (' + folded.length + '): fixing ' + (folded.length === 1 ? 'it saves' : 'each saves') + ' no step time'),
          el('p', { className: 'muted' }, 'In that run\'s step model, removing it alone does not shorten the step: other work sets the pace.'),
          folded.map(findingCard)) : null];
    }

    function renderFindings(node) {
      node.appendChild(el('h1', null, 'Findings of each run\'s diagnosis'));
      node.appendChild(howTo('Each run was diagnosed on its own (slow workers, bottleneck functions, hangs). These are the findings AFTER has and BEFORE did not, those that went away, and those in both (same category and function).'));
      node.appendChild(el('div', null, findingList('New in AFTER', list(findings.new), 'findings-new')));
      node.appendChild(el('div', null, findingList('Gone in AFTER', list(findings.resolved), 'findings-resolved')));
      node.appendChild(el('div', null, findingList('In both', list(findings.persisting), 'findings-persisting')));
    }

    function renderNotes(node) {
      node.appendChild(el('h1', null, 'Notes'));
      node.appendChild(el('ul', { id: 'diff-notes' }, list(D.notes).map(function (n) { return el('li', null, String(n)); })));
      if (list(D.warnings).length) {
        node.appendChild(el('h2', null, 'Input problems'));
        node.appendChild(el('ul', { id: 'diff-warnings' }, list(D.warnings).map(function (n) { return el('li', null, String(n)); })));
      }
    }

    /* Start ------------------------------------------------------------------------ */
    document.title = 'PerfDisplay: PerfTracker diff';
    document.getElementById('job-line').textContent = 'BEFORE ' + (before.input || '?') + ' → AFTER ' + (after.input || '?') +
      (D.comparison ? ' · ' + D.comparison : '') + (D.generated_at ? ' · ' + D.generated_at : '');
    var badge = document.getElementById('verdict-badge');
    badge.textContent = verdict.change || 'no verdict';
    badge.className = 'badge ' + ({ slower: 'hang', hang: 'hang', faster: 'healthy', unchanged: '' }[verdict.change] || '');
    buildNav();
    window.addEventListener('hashchange', route);
    route();
    document.body.dataset.ready = 'true';
  };
})();
