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
 */
'use strict';
(function () {
  var PD = window.PD, el = PD.el, fmt = PD.fmt;
  var R = window.PT_REPORT;
  var main = document.getElementById('main');
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

  /* Views ----------------------------------------------------------------------------- */
  var VIEWS = [
    { id: 'overview', title: 'Overview', render: renderOverview },
    { id: 'workers', title: 'Workers', render: renderWorkers, count: function () { return listedWorkers.length; } },
    { id: 'timeline', title: 'Step timeline', render: renderTimeline, optional: function () { return !timelineRows().length; } },
    { id: 'heatmap', title: 'Heatmap', section: 'Heatmap', render: renderHeatmap },
    { id: 'gpu-compute', title: 'GPU Compute', section: 'GPU Compute', render: renderGpuCompute,
      bad: function (s) { return (s['workers with potential GPU issues'] || []).length + entries(s['workers with abnormal GPU utilization']).length; } },
    { id: 'gpu-memory', title: 'GPU memory operations', section: 'GPU memory operations', render: renderGpuMemory,
      bad: function (s) { return entries(s).filter(function (e) { return entries(e[1].abnormal_workers).length; }).length; } },
    { id: 'communication', title: 'Communication', section: 'Communication', render: renderCommunication,
      bad: function () { return communicationRows().filter(function (r) { return r.abnormal.length; }).length; } },
    { id: 'cuda-runtime', title: 'CUDA Runtime', section: 'CUDA Runtime', render: renderCudaRuntime,
      bad: function (s) { return entries(s).filter(function (e) { return entries(e[1].abnormal_workers).length; }).length; } },
    { id: 'python', title: 'Python functions', section: 'Python functions', render: renderPython,
      count: function () { return entries(section('Python functions')).length; } },
    { id: 'hardware', title: 'Hardware', section: 'Hardware', render: renderHardware, optional: true },
    { id: 'warnings', title: 'Warnings', render: renderWarnings,
      count: function () { return (R.warnings || []).length; }, optional: function () { return !(R.warnings || []).length; } },
    { id: 'traces', title: 'Raw traces', render: renderTraces,
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
    if (id === 'communication') return !communicationRows().length;
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
    charts = []; mounted = [];
    PD.tooltip.hide();
    var node = el('section', { className: 'view', id: 'view-' + view.id, dataset: { view: view.id } });
    var findingIndex = params.has('finding') ? Number(params.get('finding')) : -1;
    if (findingIndex >= 0 && findings[findingIndex] && view.id !== 'overview') node.appendChild(evidencePanel(findings[findingIndex], findingIndex));
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

  /* A hang finding's ranks side by side (evidence.hang, docs/report-schema.md): each
   * rank's role, the process group, its call there (number, operation, size, state) and
   * where its training thread is. */
  var HANG_KIND = { missing: 'a rank missing from a collective', mismatch: 'calls that do not match',
                    skipped: 'a skipped collective', deadlock: 'groups entered in opposite orders',
                    stuck_in_transport: 'a collective nobody returns from', collective_error: 'a collective that failed',
                    stopped: 'workers that stopped', blocked: 'workers blocked in a collective' };
  function callText(c) {
    if (!c) return '–';
    var size = c.count >= 0 ? c.count + (c.dtype ? ' × ' + c.dtype : ' elements') : (c.dtype || '');
    return c.op + (size ? ' (' + size + ')' : '');
  }
  function hangTable(h) {
    var rows = (h.ranks || []).slice();
    /* Fixed columns, and the call and the stack shortened in the middle to what the view
     * leaves (the page less the navigation, the finding's margins and a scroll bar), whole
     * on hover: a hang's sizes and NCCL kernel names would otherwise run past the edge. */
    var font = '14px ' + getComputedStyle(document.body).fontFamily, monoFont = '12.5px ui-monospace, Menlo, Consolas, monospace';
    var room = Math.max(360, viewWidth() - 60 - 20 - (60 + 96 + 70 + 70 + 96));
    var callW = Math.round(room * 0.42), whereW = room - callW;
    var heading = 'Kind: ' + (HANG_KIND[h.kind] || h.kind) + (h.group !== null && h.group !== undefined ? ' · group ' + h.group : '') +
      (typeof h.seq === 'number' ? ' · call #' + h.seq + (h.call ? ' ' + callText(h.call) : '') : '') +
      (h.groups ? ' · groups ' + h.groups.join(' and ') : '') + (h.more_ranks ? ' · ' + h.more_ranks + ' more ranks not shown' : '');
    return el('div', { className: 'hang-ranks' },
      el('p', { className: 'muted' }, heading),
      table({
        rows: rows,
        visibleRows: 8,
        sort: { column: 0, descending: false },
        columns: [
          { label: 'rank', value: function (r) { return r.rank; }, numeric: true, width: '60px' },
          { label: 'role', value: function (r) { return r.role; }, width: '96px', render: function (r) {
              return el('span', { className: /missing|differs|failed|no answer|stopped/.test(r.role) ? 'status-hang' : '' }, r.role); } },
          { label: 'group', value: function (r) { return r.group; }, width: '70px' },
          { label: 'call #', value: function (r) { return r.call ? r.call.seq : null; }, text: function (r) { return r.call ? String(r.call.seq) : '–'; }, numeric: true, width: '70px' },
          { label: 'call', value: function (r) { return callText(r.call); }, width: callW + 'px', title: function (r) { return callText(r.call); },
            render: function (r) { return PD.fitText(callText(r.call), callW - 18, font); } },
          { label: 'state', value: function (r) { return r.call ? r.call.state : (r.answered ? '–' : 'no answer'); }, width: '96px' },
          { label: 'where', value: function (r) { return r.stack || ''; }, width: whereW + 'px', render: function (r) {
              return r.stack ? el('span', { className: 'mono', title: r.stack }, PD.fitText(PD.shortFunction('python', r.stack, 200), whereW - 18, monoFont))
                             : el('span', { className: 'muted' }, r.answered ? '–' : 'no answer'); } }
        ]
      }));
  }

  /* Evidence: what a finding rests on, at the top of the section it points to. */
  function evidencePanel(f, index) {
    var ev = f.evidence || {}, values = entries(ev.values);
    var base = evidenceBaseline(f, ev, values.map(function (e) { return [Number(e[0]), e[1]]; }));
    var median = base ? base.value : null, versus = base && base.median ? '× median' : '× reference';
    return el('div', { className: 'panel evidence', id: 'evidence' },
      el('div', { className: 'label muted' }, 'Evidence for finding ' + (index + 1) + (index === 0 ? ' (root cause)' : '')),
      el('p', { className: 'summary' }, PD.richText(f.summary || '')),
      ev.key ? el('p', null, 'Key in "' + (ev.section || '') + '": ', el('span', { className: 'mono', title: ev.key }, PD.shortFunction(f.category, ev.key, 90))) : null,
      ev.hang ? hangTable(ev.hang) : null,
      ev.metric && !ev.hang ? el('p', null, 'Metric: ', el('b', null, ev.metric), base ? [' · ', el('span', { id: 'evidence-baseline',
        dataset: { value: String(base.value), median: String(base.median), over: String(base.over || '') } }, base.label + ': ' + fmt.num(base.value))] : '') : null,
      values.length && !ev.hang ? table({
        rows: values.map(function (e) { return { rank: Number(e[0]), value: e[1] }; }),
        visibleRows: 6,
        sort: { column: 2, descending: true },
        columns: [
          { label: 'rank', value: function (r) { return r.rank; }, numeric: true, width: '70px' },
          { label: 'worker', value: function (r) { return workerName(r.rank); }, render: function (r) { return workerCell(workerName(r.rank)); } },
          { label: ev.metric || 'value', value: function (r) { return r.value; }, text: function (r) { return fmt.num(r.value); }, numeric: true },
          { label: versus, value: function (r) { return median ? r.value / median : null; }, text: function (r) { return median ? fmt.times(r.value / median) : '–'; }, numeric: true }
        ]
      }) : null);
  }

  /* What a finding's evidence values are set against, and over which workers. The report's
   * evidence.median is each finding's own reference (the workers it does not name, the
   * fastest ones, per-step medians averaged), so the page calls a figure a median only when
   * it is over every worker analysed: the values' own median when they are every worker's;
   * for a function's "bottleneck ms per step", the heatmap's median worker (a cell is a
   * worker's value less the median over every worker, over the step: so a named worker's
   * value less its cell times the step); the report's figure for a "(median over workers)"
   * metric. Otherwise it is the report's reference, named so; none for a hang or lost ranks. */
  function evidenceBaseline(f, ev, values) {
    if (f.category === 'hang' || f.category === 'lost') return null;
    var n = workersAnalyzed, every = n === 1 ? 'the one worker analysed' : 'median over all ' + n + ' workers';
    var allAnalyzed = values.length === n && values.every(function (e) { var w = byRank.get(e[0]); return w && w.status !== 'missing'; });
    if (n >= 1 && allAnalyzed) return { value: PD.median(values.map(function (e) { return e[1]; })), median: true, over: n, label: every };
    var fromHeatmap = ev.metric === 'bottleneck ms per step' ? heatmapMedian(ev.key, values) : null;
    if (fromHeatmap !== null) return { value: fromHeatmap, median: true, over: n, label: every };
    if (typeof ev.median !== 'number') return null;
    if (/\(median over workers\)/.test(ev.metric || '')) return { value: ev.median, median: true, over: n, label: every };
    return { value: ev.median, median: false, label: 'the finding\'s reference value (not a median over every worker)' };
  }

  /* The median over every worker of a function's exposed ms per step, from the heatmap and
   * the named worker whose cell is closest to it (the cells carry 4 significant digits:
   * within their rounding of 0, the median is 0). null: the function is not a column. */
  function heatmapMedian(key, values) {
    var h = section('Heatmap'), step = job.median_step_time_ms;
    var column = h && key ? (h.functions || []).findIndex(function (fn) { return fn.name === key; }) : -1;
    if (column < 0 || typeof step !== 'number' || !(step > 0) || !Array.isArray(h.ranks) || !Array.isArray(h.values)) return null;
    var rowOf = new Map();
    h.ranks.forEach(function (r, i) { rowOf.set(r, i); });
    var best = null;
    values.forEach(function (e) {
      var row = rowOf.has(e[0]) ? h.values[rowOf.get(e[0])] : null, cell = Array.isArray(row) ? row[column] : null;
      if (typeof cell === 'number' && typeof e[1] === 'number' && (!best || Math.abs(cell) < Math.abs(best.cell))) best = { value: e[1], cell: cell };
    });
    if (!best) return null;
    var median = best.value - best.cell * step;
    return Math.abs(median) <= Math.abs(best.cell) * step * 5e-4 ? 0 : median;
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
  /* The breakdown class a finding is about, for the Workers table's marked column. */
  var CLASS_OF_CATEGORY = { gpu_compute: 'compute_ms', gpu_memory: 'memory_ms', communication: 'communication_ms',
                            cuda_runtime: 'runtime_ms', python: 'python_ms', cpu_bound: 'python_ms', host: 'runtime_ms' };
  var CATEGORY_LABEL = { gpu_compute: 'GPU compute', gpu_memory: 'GPU memory', communication: 'communication',
                         cuda_runtime: 'CUDA runtime', python: 'Python', hang: 'hang', hardware: 'hardware', host: 'host CPU',
                         cpu_bound: 'CPU-bound', other: 'other' };

  function heatmapColumn(fnName) {
    var h = section('Heatmap');
    if (!h || !fnName) return -1;
    return (h.functions || []).findIndex(function (f) { return f.name === fnName; });
  }

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

  /* Overview ---------------------------------------------------------------------------- */
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

  /* The bounded form's distribution of metric over every worker (scale.distributions). */
  function quantile(metric, q) {
    var d = scale && scale.distributions && scale.distributions[metric];
    return d && d.quantiles && typeof d.quantiles[q] === 'number' ? d.quantiles[q] : null;
  }
  var QUANTILE_COLUMNS = ['p0', 'p1', 'p5', 'p25', 'p50', 'p75', 'p95', 'p99', 'p100'];
  function distributionTable() {
    var metrics = Object.keys((scale && scale.distributions) || {});
    return table({
      rows: metrics, visibleRows: metrics.length,
      columns: [{ label: 'over every worker', value: function (m) { return m; }, width: '170px' },
                { label: 'workers', value: function (m) { return scale.distributions[m].count; }, numeric: true, width: '80px' }]
        .concat(QUANTILE_COLUMNS.map(function (q) {
          return { label: q === 'p0' ? 'min' : q === 'p100' ? 'max' : q === 'p50' ? 'median' : q, numeric: true, value: function (m) { return quantile(m, q); },
                   text: function (m) { return m === 'gpu_utilization' ? fmt.pct(quantile(m, q)) : fmt.ms(quantile(m, q)); } };
        }))
    });
  }

  /* The bounded form's scale.nodes: one row per node; a click opens it in the heatmap. */
  function nodesTable() {
    var three = function (n, k, i) { return Array.isArray(n[k]) ? n[k][i] : null; };
    return table({
      rows: scale.nodes.filter(function (n) { return n && typeof n === 'object'; }), filter: 'Filter nodes (host)', visibleRows: 8,
      sort: { column: 5, descending: true }, /* the slowest nodes first */
      rowClass: function (n) { return n.not_normal > 0 ? 'culprit' : ''; },
      onRowClick: function (n) { if (Array.isArray(n.ranks)) location.hash = '#/heatmap?rank=' + n.ranks[0]; },
      columns: [{ label: 'host', value: function (n) { return n.host; }, width: '180px', search: true, whole: true },
                { label: 'workers', value: function (n) { return n.workers; }, numeric: true, width: '80px' },
                { label: 'ranks', value: function (n) { return Array.isArray(n.ranks) ? n.ranks[0] : null; }, text: function (n) { return Array.isArray(n.ranks) ? n.ranks[0] + '–' + n.ranks[1] : '–'; }, width: '120px' },
                { label: 'min step', value: function (n) { return three(n, 'step_time_ms', 0); }, text: function (n) { return fmt.ms(three(n, 'step_time_ms', 0)); }, numeric: true },
                { label: 'median step', value: function (n) { return three(n, 'step_time_ms', 1); }, text: function (n) { return fmt.ms(three(n, 'step_time_ms', 1)); }, numeric: true },
                { label: 'max step', value: function (n) { return three(n, 'step_time_ms', 2); }, text: function (n) { return fmt.ms(three(n, 'step_time_ms', 2)); }, numeric: true },
                { label: 'median GPU utilization', value: function (n) { return three(n, 'gpu_utilization', 1); }, text: function (n) { return fmt.pct(three(n, 'gpu_utilization', 1)); }, numeric: true, className: 'wrap' },
                { label: 'slowest rank', value: function (n) { return n.slowest_rank; }, numeric: true, width: '90px' },
                { label: 'not normal', value: function (n) { return n.not_normal; }, numeric: true, width: '90px' }]
    });
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

  /* The width of the widest of texts in a font (px). */
  var measureContext = null;
  function longestText(texts, font) {
    measureContext = measureContext || document.createElement('canvas').getContext('2d');
    measureContext.font = font;
    var widest = 0, longest = {};
    texts.forEach(function (t) { var n = t.length; if (!longest[n]) longest[n] = t; }); /* one of each length */
    Object.keys(longest).forEach(function (n) { widest = Math.max(widest, measureContext.measureText(longest[n]).width); });
    return widest;
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

  /* Workers --------------------------------------------------------------------------- */
  function renderWorkers(node, params) {
    heading(node, 'Workers', 'One row per worker (rank). Step time is the median duration of the profiled steps. Each step\'s time is split into exposed time by priority: GPU compute first, then memory operations, communication, CUDA runtime, Python, and idle for the rest, so the parts add up to the step time. In a synchronous job every worker\'s step takes about as long, so look at the split: the straggler computes longer and communicates less, because the others wait for it inside their collectives.', [
      ['status', 'normal, slow (named in a finding), hang, missing (expected but never reported) or error (its trace could not be read).'],
      ['GPU utilization', 'share of the profiled window with a compute kernel running.'],
      ['rank source', 'where the rank came from: distributedInfo in the trace, the file name, the file order, or the collector.']
    ]);
    if (scale) {
      node.appendChild(el('p', { className: 'muted', id: 'bounded-note' }, 'A job of ' + listedWorkers.length + ' workers: report.json keeps full detail (breakdown, steps) for the ' +
        analyzed.length + ' workers it is about (named in a finding, outliers, listed in a section); the table has every worker, and opening one loads its detail from its part.'));
      node.appendChild(el('h2', null, 'Every worker, as distributions'));
      node.appendChild(distributionTable());
      node.appendChild(el('h2', null, 'Nodes'));
      node.appendChild(nodesTable());
      node.appendChild(el('h2', null, 'The workers in full detail'));
    }
    node.appendChild(breakdownLegend());
    if (chartWorkers().length > 1) node.appendChild(chartBox(300, breakdownChartOption));
    if (chartWorkers().length > CHART_BARS) node.appendChild(el('p', { className: 'muted', id: 'chart-buckets' }, 'Each bar stands for ' +
      Math.ceil(chartWorkers().length / CHART_BARS) + ' consecutive ranks and shows the one among them named in a finding, else the one with the longest step; the table below has every worker.'));
    if (sampled) node.appendChild(el('p', { className: 'muted', id: 'sample-note' }, sampleNote()));
    var detail = el('div', { id: 'worker-detail' });
    var wantRank = params.has('rank') && params.get('rank') !== '' ? Number(params.get('rank')) : null;
    var maxStep = PD.maxOf(workers.map(function (w) { return w.step_time_ms || 0; }), 0);
    /* The class of the finding the reader came from (else the root cause's): its column
     * is marked. The columns up to idle fit 1400 px; the rest scroll, the rank column
     * staying in place. */
    var findingIndex = params.has('finding') ? Number(params.get('finding')) : -1;
    var focus = findings[findingIndex] || (diagnosis.verdict !== 'healthy' ? findings[0] : null);
    var focusKey = focus ? CLASS_OF_CATEGORY[focus.category] : null;
    var classWidth = { communication_ms: 124 }, fixed = 58 + 70 + 86 + 86 + 5 * 84 + 124, minBar = 96;
    /* The worker column as wide as the longest name, within what the view leaves (less a
     * scroll bar); longer names are shortened in the middle, whole on hover. The breakdown
     * bar takes the rest. */
    var font = '14px ' + getComputedStyle(document.body).fontFamily, room = viewWidth() - 20 - fixed;
    var nameW = Math.max(110, Math.min(240, room - minBar, Math.ceil(longestText(listedWorkers.map(function (w) { return w.name || ''; }), font)) + 20));
    var barW = Math.max(minBar, Math.min(160, room - nameW));
    var cols = [
      { label: 'rank', value: function (w) { return w.rank; }, numeric: true, width: '58px', className: 'sticky-col', search: true },
      { label: 'worker', value: function (w) { return w.name; }, width: nameW + 'px', title: function (w) { return w.name; }, search: true,
        render: function (w) { return PD.fitText(w.name || '', nameW - 18, font); } },
      { label: 'status', value: function (w) { return w.status; }, render: function (w) { return el('span', { className: 'status-' + w.status }, w.status || ''); }, width: '70px', search: true, whole: true },
      { label: 'step time', value: function (w) { return w.step_time_ms; }, text: function (w) { return fmt.ms(w.step_time_ms); }, numeric: true, width: '86px' },
      { label: 'GPU utilization', value: function (w) { return w.gpu_utilization; }, text: function (w) { return fmt.pct(w.gpu_utilization); }, numeric: true, width: '86px', className: 'wrap' },
      { label: 'breakdown', value: function (w) { return (w.breakdown || {}).compute_ms; }, render: function (w) { return breakdownBar(w.breakdown || {}, maxStep); }, width: barW + 'px', help: 'exposed time per step; sorts by compute' }
    ].concat(PD.BREAKDOWN.map(function (c) {
      var marked = c.key === focusKey;
      return { label: c.label, value: function (w) { return (w.breakdown || {})[c.key]; }, text: function (w) { return fmt.ms((w.breakdown || {})[c.key]); },
               numeric: true, width: (classWidth[c.key] || 84) + 'px', className: 'wrap' + (marked ? ' finding-col' : ''),
               help: c.label + ' ms per step' + (marked ? ' (the class of ' + (findings.indexOf(focus) === 0 ? 'the root cause' : 'finding ' + (findings.indexOf(focus) + 1)) + ')' : '') };
    })).concat([
      { label: 'host', value: function (w) { return w.host; }, width: '120px', search: true, whole: true },
      { label: 'local rank', value: function (w) { return w.local_rank; }, numeric: true, width: '66px', className: 'wrap' },
      { label: 'pid', value: function (w) { return w.pid; }, numeric: true, width: '86px' },
      { label: 'rank source', value: function (w) { return w.rank_source; }, width: '130px', whole: true }
    ]);
    var t = new PD.Table({
      rows: listedWorkers, columns: cols, filter: 'Filter workers (rank, name, host, status)', visibleRows: 16,
      rowClass: function (w) { return culprits.has(w.rank) ? 'culprit' : ''; },
      onRowClick: function (w) { showWorker(w); }
    });
    t.node.id = 'workers-table';
    node.appendChild(t.node);
    node.appendChild(detail);
    /* On a narrow window the marked column can lie past the table's right edge: scroll it
     * into view, right of the fixed rank column. */
    mounted.push({ mount: function () {
      t.fitColumns();
      var th = t.node.querySelector('th.finding-col'), box = t.scroll;
      var past = th ? th.getBoundingClientRect().right - (box.getBoundingClientRect().left + box.clientWidth) : 0;
      if (past > 0) box.scrollLeft += Math.ceil(past);
    } });

    function showWorker(w) {
      t.highlight(function (x) { return x === w; });
      if (w.summary && scale) { /* the bounded form: its full detail is in its part */
        detail.replaceChildren(el('div', { className: 'panel', dataset: { rank: w.rank } },
          el('h2', null, 'Rank ' + w.rank + ' · ' + (w.name || '')), el('p', { className: 'muted', id: 'part-loading' }, 'Loading this worker\'s detail…')));
        PD.loadWorker(scale, w.rank).then(function (full) {
          if (!detail.isConnected || !detail.querySelector('[data-rank="' + w.rank + '"]')) return; /* another worker was opened */
          Object.keys(full).forEach(function (k) { if (k !== 'rank') w[k] = full[k]; });
          delete w.summary;
          t.invalidate();
          t.render();
          showWorker(w);
        }, function (e) {
          var p = detail.querySelector('#part-loading');
          if (p) { p.className = 'error'; p.textContent = 'This worker\'s detail is not available: ' + e.message; }
        });
        detail.scrollIntoView({ block: 'nearest' });
        return;
      }
      detail.replaceChildren(workerDetail(w));
      if (w.steps && w.steps.length && hasCharts) {
        var chart = chartPart(260, function () { return stepsChartOption(w); });
        detail.appendChild(chart.node);
        chart.mount();
      }
      detail.scrollIntoView({ block: 'nearest' });
    }
    if (wantRank !== null && byRank.has(wantRank)) mounted.push({ mount: function () { showWorker(byRank.get(wantRank)); } });
  }

  function workerDetail(w) {
    var steps = w.steps || [];
    return el('div', { className: 'panel', dataset: { rank: w.rank } },
      el('h2', null, 'Rank ' + w.rank + ' · ' + (w.name || '')),
      el('p', { className: 'muted' }, 'host ' + (w.host || '–') + ' · local rank ' + (w.local_rank !== undefined ? w.local_rank : '–') +
        ' · pid ' + (w.pid !== undefined ? w.pid : '–') + ' · rank from ' + (w.rank_source || '–') + ' · status ' + (w.status || '–')),
      culprits.has(w.rank) ? el('p', { className: 'status-slow' }, 'Named in: ', findings.filter(function (f) { return (f.workers || []).indexOf(w.rank) >= 0 && !f.all_workers; })
        .map(function (f, i) { return [i ? ' ' : '', PD.richText(f.summary || '')]; })) : null,
      el('h3', null, 'Per step'),
      steps.length ? table({
        rows: steps, visibleRows: 10,
        columns: [{ label: 'step', value: function (s) { return s.step; }, numeric: true },
                  { label: 'step time', value: function (s) { return s.ms; }, text: function (s) { return fmt.ms(s.ms); }, numeric: true },
                  { label: 'breakdown', value: function (s) { return s.compute_ms; }, render: function (s) { return breakdownBar(s, s.ms); }, width: '180px' }]
          .concat(PD.BREAKDOWN.map(function (c) {
            return { label: c.label, value: function (s) { return s[c.key]; }, text: function (s) { return fmt.ms(s[c.key]); }, numeric: true };
          }))
      }) : el('p', { className: 'muted' }, 'No per-step data for this worker.'),
      w.raw_trace ? el('p', null, 'Raw trace: ', rawTraceLink(w.raw_trace)) : null);
  }

  function escapedTooltip(params) {
    var list = Array.isArray(params) ? params : [params];
    if (!list.length) return '';
    return PD.escapeHtml(list[0].axisValueLabel || list[0].name) + '<br>' + list.map(function (p) {
      return p.marker + PD.escapeHtml(p.seriesName) + ': ' + PD.escapeHtml(fmt.ms(p.value));
    }).join('<br>');
  }

  /* The breakdown chart's bars: one per worker up to CHART_BARS; above, one per run of
   * consecutive ranks, drawn as its worker that matters most (named in a finding, else
   * the longest step), so 100,000 workers cost what 2,048 do and a straggler still shows. */
  var CHART_BARS = 2048;
  /* The workers with a breakdown: all of them, or the bounded form's full-detail ones. */
  function chartWorkers() { return scale ? analyzed : listedWorkers; }
  function chartBars() {
    var shown = chartWorkers(), n = shown.length;
    if (n <= CHART_BARS) return shown.map(function (w) { return { worker: w, label: 'rank ' + w.rank }; });
    var bars = [];
    for (var b = 0; b < CHART_BARS; b++) {
      var lo = Math.floor(b * n / CHART_BARS), hi = Math.floor((b + 1) * n / CHART_BARS), pick = shown[lo];
      for (var i = lo; i < hi; i++) {
        var w = shown[i], named = culprits.has(w.rank), pickNamed = culprits.has(pick.rank);
        if (named !== pickNamed ? named : (w.step_time_ms || 0) > (pick.step_time_ms || 0)) pick = w;
      }
      bars.push({ worker: pick, label: 'ranks ' + shown[lo].rank + '–' + shown[hi - 1].rank + ': rank ' + pick.rank });
    }
    return bars;
  }

  function breakdownChartOption() {
    var bars = chartBars(), workers = bars.map(function (b) { return b.worker; }), ranks = bars.map(function (b) { return b.label; });
    var window_ = Math.min(100, 100 * 96 / Math.max(1, workers.length));
    return {
      animation: workers.length <= 256,
      tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' }, formatter: escapedTooltip },
      grid: { left: 60, right: 20, top: 36, bottom: workers.length > 96 ? 70 : 40 },
      xAxis: { type: 'category', data: ranks },
      yAxis: { type: 'value', name: 'ms per step' },
      dataZoom: workers.length > 96 ? [{ type: 'slider', start: 0, end: window_ }, { type: 'inside' }] : [],
      series: PD.BREAKDOWN.map(function (c) {
        return { name: c.label, type: 'bar', stack: 'step', itemStyle: { color: c.color }, large: workers.length > 512,
                 data: workers.map(function (w) { return (w.breakdown || {})[c.key] || 0; }) };
      })
    };
  }

  function stepsChartOption(w) {
    return {
      tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' }, formatter: escapedTooltip },
      grid: { left: 60, right: 20, top: 20, bottom: 30 },
      xAxis: { type: 'category', data: w.steps.map(function (s) { return 'step ' + s.step; }) },
      yAxis: { type: 'value', name: 'ms' },
      series: PD.BREAKDOWN.map(function (c) {
        return { name: c.label, type: 'bar', stack: 'step', itemStyle: { color: c.color }, data: w.steps.map(function (s) { return s[c.key] || 0; }) };
      })
    };
  }

  /* Step timeline ------------------------------------------------------------------------ */
  function timelineRows() {
    return analyzed.filter(function (w) { return Array.isArray(w.steps) && w.steps.length; });
  }

  function renderTimeline(node, params) {
    var model = diagnosis.step_model || {}, rows = timelineRows();
    var synced = rows.some(function (w) { return w.steps.some(function (st) { return Array.isArray(st.syncs); }); });
    heading(node, 'Step timeline', 'One row per rank, each profiled step side by side, every rank\'s step from its own start. A step is a chain of sync points: the collectives a worker waits in (an all-reduce, a barrier). Between two of them each worker works (blue), then waits for the others (orange) until the collective ends (the black tick). In a synchronous job every segment lasts as long as its busiest worker\'s work: that rank sets the step time (red outline), and the others\' orange is time spent waiting for it. Fix what the red rank does, not the waiting.', [
      ['blue', 'the worker\'s own work before each sync point: compute, memory operations, CUDA runtime calls, Python.'],
      ['orange', 'waiting: inside a collective until every worker has arrived (and the transfer), or idle.'],
      ['red outline', 'the rank the step model (' + (typeof model.step_ms === 'number' ? 'a modelled step of ' + fmt.ms(model.step_ms) : 'diagnosis.step_model') + ') finds the busiest in most of the step\'s segments: the others wait for it.'],
      ['"Step setters first"', 'orders the rows by how many steps each rank sets.']
    ]);
    if (scale) node.appendChild(el('p', { className: 'muted', id: 'timeline-bounded' }, 'A job of ' + listedWorkers.length + ' workers: the rows are the ' + rows.length +
      ' workers report.json holds in full detail (named in a finding, outliers, listed), the ones whose steps tell the story; every worker\'s step time is in the Workers view.'));
    if (!synced) node.appendChild(el('p', { className: 'muted', id: 'no-syncs' }, 'These summaries carry no sync points (a trace whose collectives the collector could not see, or an older summary): each step shows its exposed work, then the rest as waiting.'));
    var timeline = new PD.Timeline({
      workers: rows, pace: model.pace, culprits: culprits,
      onRowClick: function (r) { location.hash = '#/workers?rank=' + r; }
    });
    node.appendChild(timeline.node);
    var wantRank = params.has('rank') && params.get('rank') !== '' ? Number(params.get('rank')) : null;
    mounted.push({ node: timeline.node, mount: function () { timeline.mount(); if (wantRank !== null) timeline.scrollToRank(wantRank); },
                   destroy: function () { timeline.destroy(); } });
  }

  /* Heatmap --------------------------------------------------------------------------- */
  function renderHeatmap(node, params) {
    var h = section('Heatmap');
    heading(node, 'Heatmap: workers × functions', 'Each row is a worker (rank), each column a function: a kernel, a memory operation, a collective, a CUDA runtime call or a Python call stack. "Deviation from median" colours a cell by how much longer (red) or shorter (blue) that worker spent in the function than the median worker did, as a share of the step time; a faulty worker is a row that stands out. "Time share" colours by the function\'s bottleneck ratio on that worker instead. Remember the straggler rule: the worker that arrives last at a collective spends the least time in it (blue), because the others wait for it (red) — judge a worker by what it does instead of waiting.', [
      ['▶ red row label', 'a worker named in a finding.'],
      ['"Largest excess first"', 'orders the rows by each worker\'s largest excess over the median outside communication: the slowest workers come first.'],
      ['strip on the right', 'every worker at once, red by that same excess (several workers per pixel when there are many; the largest shows). Click it to jump.']
    ]);
    if (!((h.ranks || []).length || (scale && scale.nodes.length)) || !(h.functions || []).length) {
      node.appendChild(el('p', { className: 'muted' }, 'The heatmap is empty.'));
      return;
    }
    var findingIndex = params.has('finding') ? Number(params.get('finding')) : -1, f = findings[findingIndex];
    var column = heatmapColumn(params.get('key') || (f && f.function));
    var heatmap = new PD.Heatmap({
      heatmap: h, culprits: culprits, workerName: workerName, highlightColumn: column, nodeOf: nodeOf,
      nodes: scale ? PD.scaleNodes(scale, h) : null,
      loadNode: scale ? function (n) { return PD.loadHeatmapRows(scale, PD.partsOf(scale, n.ranks), n.ranks); } : null,
      onRowClick: function (r) { location.hash = '#/workers?rank=' + r; },
      onColumnClick: function (j) {
        var fn = h.functions[j];
        location.hash = '#/' + categoryView(fn.category) + '?key=' + encodeURIComponent(fn.name);
      }
    });
    node.appendChild(heatmap.node);
    var focus = f && !f.all_workers && (f.workers || []).length ? f.workers[0] : (culprits.size ? Array.from(culprits).sort(function (a, b) { return a - b; })[0] : null);
    var wantRank = params.has('rank') && params.get('rank') !== '' ? Number(params.get('rank')) : null;
    mounted.push({ node: heatmap.node, mount: function () {
                     heatmap.mount();
                     if (wantRank !== null) heatmap.scrollToRank(wantRank);
                     else if (focus !== null && findingIndex >= 0) heatmap.scrollToRank(focus);
                   },
                   destroy: function () { heatmap.destroy(); } });
  }

  /* GPU Compute ------------------------------------------------------------------------ */
  function renderGpuCompute(node, params) {
    var s = section('GPU Compute'), key = matchKey(params);
    heading(node, 'GPU Compute', 'How busy each GPU was with compute kernels, which kernels cost the most, and which workers ran the same kernels slower than the others.', [
      ['min/median/max GPU utilization (in [0,1])', 'across workers, the share of the profiled window with a compute kernel running: 0.28 means the GPU computed 28% of the time.'],
      ['workers with abnormal GPU utilization', 'workers whose utilization is far from the others, with their utilization. Empty means every worker is normal.'],
      ['major_kernel_executions', 'the kernels that cost the most. The key is the kernel name followed by its grid and block (name320_1_1|512_1_1); each has the median cost of one execution and its bottleneck ratio, the share of end-to-end time it takes.'],
      ['workers with potential GPU issues', 'workers whose kernels run slower than the same kernels elsewhere. Empty means all are normal.'],
      ['detailed report', 'present when the list above is not empty: which worker ran which kernel slower, and by how much.']
    ]);
    var util = s['min/median/max GPU utilization (in [0,1])'] || [];
    node.appendChild(statCards([['min GPU utilization', fmt.pct(util[0])], ['median GPU utilization', fmt.pct(util[1])], ['max GPU utilization', fmt.pct(util[2])]]));

    var abnormal = entries(s['workers with abnormal GPU utilization']);
    node.appendChild(el('h2', null, 'workers with abnormal GPU utilization'));
    node.appendChild(abnormal.length ? table({
      rows: abnormal, visibleRows: 8, sort: { column: 2, descending: false },
      columns: [{ label: 'worker', value: function (e) { return e[0]; }, render: function (e) { return workerCell(e[0]); } },
                { label: 'rank', value: function (e) { return rankText(e[0]); }, numeric: true, width: '70px' },
                { label: 'GPU utilization', value: function (e) { return e[1]; }, text: function (e) { return fmt.pct(e[1]); }, numeric: true }]
    }) : el('p', { className: 'muted' }, 'None: every worker\'s GPU utilization is close to the others.'));

    var kernels = entries(s.major_kernel_executions);
    var maxRatio = PD.maxOf(kernels.map(function (e) { return e[1]['bottleneck ratio (in [0,1])'] || 0; }), 0);
    node.appendChild(el('h2', null, 'major_kernel_executions'));
    node.appendChild(table({
      rows: kernels, sort: { column: 3, descending: true }, filter: 'Filter kernels',
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'kernel', value: function (e) { return PD.splitKernelKey(e[0]).name; }, title: function (e) { return e[0]; },
                  render: function (e) { return el('span', { title: e[0], className: 'mono' }, PD.shortKernel(PD.splitKernelKey(e[0]).name)); } },
                { label: 'grid|block', value: function (e) { return PD.splitKernelKey(e[0]).launch; }, width: '150px' },
                { label: 'median cost per execution (ms)', value: function (e) { return e[1]['median cost per execution (ms)']; }, text: function (e) { return fmt.num(e[1]['median cost per execution (ms)']); }, numeric: true, width: '200px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (e) { return e[1]['bottleneck ratio (in [0,1])']; }, render: function (e) { return ratioBar(e[1]['bottleneck ratio (in [0,1])'], maxRatio); }, numeric: true, width: '190px' }]
    }));

    var issues = s['workers with potential GPU issues'] || [];
    node.appendChild(el('h2', null, 'workers with potential GPU issues'));
    node.appendChild(issues.length ? el('ul', { className: 'plain', id: 'gpu-issue-workers' }, issues.map(function (n) { return el('li', null, workerCell(n), ' (rank ' + rankText(n) + ')'); }))
                                   : el('p', { className: 'muted' }, 'None: every worker runs its kernels as fast as the others.'));
    var detailed = [];
    entries(s['detailed report']).forEach(function (w) {
      entries(w[1]).forEach(function (k) { detailed.push({ worker: w[0], kernel: k[0], v: k[1] }); });
    });
    if (detailed.length) {
      node.appendChild(el('h2', null, 'detailed report'));
      node.appendChild(table({
        rows: detailed, sort: { column: 5, descending: true }, filter: 'Filter by worker or kernel',
        highlight: key !== null ? function (r) { return r.kernel === key; } : null,
        columns: [{ label: 'worker', value: function (r) { return r.worker; }, render: function (r) { return workerCell(r.worker); }, width: '200px' },
                  { label: 'rank', value: function (r) { return rankText(r.worker); }, numeric: true, width: '60px' },
                  { label: 'kernel', value: function (r) { return r.kernel; }, render: function (r) { return kernelCell(r.kernel); }, title: function (r) { return r.kernel; } },
                  { label: 'median cost per execution (ms)', value: function (r) { return r.v['median cost per execution (ms)']; }, text: function (r) { return fmt.num(r.v['median cost per execution (ms)']); }, numeric: true, width: '140px' },
                  { label: 'median of other workers (ms)', value: function (r) { return r.v['median of other workers (ms)']; }, text: function (r) { return fmt.num(r.v['median of other workers (ms)']); }, numeric: true, width: '140px' },
                  { label: 'slowdown', value: function (r) { return r.v.slowdown; }, text: function (r) { return fmt.times(r.v.slowdown); }, numeric: true, width: '90px' }]
      }));
    }
  }

  /* GPU memory operations --------------------------------------------------------------- */
  function abnormalMapRows(s) {
    var rows = [];
    entries(s).forEach(function (e) { entries(e[1].abnormal_workers).forEach(function (w) { rows.push({ key: e[0], worker: w[0], ratio: w[1] }); }); });
    return rows;
  }

  function abnormalWorkersTable(rows, keyLabel, key, valueLabel) {
    return rows.length ? table({
      rows: rows, sort: { column: 3, descending: true }, filter: 'Filter by worker',
      highlight: key !== null ? function (r) { return r.key === key; } : null,
      rowClass: function (r) { return culpritNames.has(r.worker) ? 'culprit' : ''; },
      columns: [{ label: keyLabel, value: function (r) { return r.key; }, render: function (r) { return el('span', { className: 'mono', title: r.key }, r.key); } },
                { label: 'worker', value: function (r) { return r.worker; }, render: function (r) { return workerCell(r.worker); } },
                { label: 'rank', value: function (r) { return rankText(r.worker); }, numeric: true, width: '70px' },
                { label: valueLabel, value: function (r) { return r.ratio; }, text: function (r) { return fmt.pct(r.ratio); }, numeric: true, width: '170px' }]
    }) : el('p', { className: 'muted' }, 'None: no worker is above 1%.');
  }

  function renderGpuMemory(node, params) {
    var s = section('GPU memory operations'), key = matchKey(params);
    heading(node, 'GPU memory operations', 'One entry per kind of memory operation (Memcpy HtoD, DtoH, DtoD, Memset, …).', [
      ['avg bottleneck ratio (in [0,1])', 'on average over workers, the share of end-to-end time spent in this operation and not hidden under GPU compute: 0.0105 means 1.05%.'],
      ['abnormal_workers', 'the workers whose bottleneck ratio for this operation is above 0.01 (1%), the threshold for memory operations, with their ratio.']
    ]);
    var kinds = entries(s);
    node.appendChild(table({
      rows: kinds, sort: { column: 1, descending: true },
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'operation', value: function (e) { return e[0]; } },
                { label: 'avg bottleneck ratio (in [0,1])', value: function (e) { return e[1]['avg bottleneck ratio (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg bottleneck ratio (in [0,1])']); }, numeric: true, width: '220px' },
                { label: 'abnormal_workers', value: function (e) { return entries(e[1].abnormal_workers).length; }, numeric: true, width: '150px' }]
    }));
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormalWorkersTable(abnormalMapRows(s), 'operation', key, 'bottleneck ratio'));
  }

  /* Communication ----------------------------------------------------------------------- */
  function communicationRows() {
    var rows = [];
    entries(section('Communication')).forEach(function (g) {
      entries(g[1]).forEach(function (k) {
        var normal = k[1].example_of_normal_worker || {};
        rows.push({ group: g[0], kernel: k[0], normal: normal, features: normal.features || {}, abnormal: Array.isArray(k[1].abnormal_workers) ? k[1].abnormal_workers : [] });
      });
    });
    return rows;
  }

  function renderCommunication(node, params) {
    var key = matchKey(params), rows = communicationRows();
    var matches = function (r) { return key !== null && (r.group === key || r.kernel === key || r.group + '|' + r.kernel === key); };
    heading(node, 'Communication', 'Collectives grouped by link and pattern ("nvlink ring", "pcie sendrecv", …), then by NCCL kernel. In a collective the worker that arrives last shows the shortest kernel, because the others wait for it inside theirs: long communication on most workers usually means one slow worker elsewhere, not a slow network.', [
      ['example_of_normal_worker', 'a typical worker for this kernel and its features; "different from other workers" counts the workers whose features differ from it.'],
      ['bottleneck ratio (in [0,1])', 'share of end-to-end time in this collective that does not overlap computation.'],
      ['avg throughput (%)', 'bus bandwidth as a percentage of the link\'s peak; throughput std (%) is its spread across calls. Kernels without message sizes report 0.'],
      ['abnormal_workers', 'workers whose features are unlike the others, with their features.']
    ]);
    var f = function (o, k) { return (o || {})[k]; };
    node.appendChild(table({
      rows: rows, sort: { column: 4, descending: true },
      highlight: key !== null ? matches : null,
      columns: [{ label: 'link pattern', value: function (r) { return r.group; }, width: '150px' },
                { label: 'NCCL kernel', value: function (r) { return r.kernel; }, render: function (r) { return el('span', { className: 'mono', title: r.kernel }, PD.shortKernel(r.kernel, 48)); } },
                { label: 'example_of_normal_worker', value: function (r) { return r.normal.worker; }, render: function (r) { return r.normal.worker ? workerCell(r.normal.worker) : ''; }, width: '190px' },
                { label: 'different from other workers', value: function (r) { return r.normal['different from other workers']; }, numeric: true, width: '110px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (r) { return f(r.features, 'bottleneck ratio (in [0,1])'); }, text: function (r) { return fmt.pct(f(r.features, 'bottleneck ratio (in [0,1])')); }, numeric: true, width: '130px' },
                { label: 'avg throughput (%)', value: function (r) { return f(r.features, 'avg throughput (%)'); }, text: function (r) { return fmt.percent(f(r.features, 'avg throughput (%)')); }, numeric: true, width: '110px' },
                { label: 'throughput std (%)', value: function (r) { return f(r.features, 'throughput std (%)'); }, text: function (r) { return fmt.percent(f(r.features, 'throughput std (%)')); }, numeric: true, width: '110px' },
                { label: 'abnormal_workers', value: function (r) { return r.abnormal.length; }, numeric: true, width: '110px' }]
    }));
    var abnormal = [];
    rows.forEach(function (r) { r.abnormal.forEach(function (a) { abnormal.push({ row: r, worker: a.worker, features: a.features || {} }); }); });
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormal.length ? table({
      rows: abnormal, sort: { column: 4, descending: false }, filter: 'Filter by worker',
      highlight: key !== null ? function (a) { return matches(a.row); } : null,
      rowClass: function (a) { return culpritNames.has(a.worker) ? 'culprit' : ''; },
      columns: [{ label: 'link pattern', value: function (a) { return a.row.group; }, width: '140px' },
                { label: 'NCCL kernel', value: function (a) { return a.row.kernel; }, render: function (a) { return el('span', { className: 'mono', title: a.row.kernel }, PD.shortKernel(a.row.kernel, 40)); } },
                { label: 'worker', value: function (a) { return a.worker; }, render: function (a) { return workerCell(a.worker); }, width: '190px' },
                { label: 'rank', value: function (a) { return rankText(a.worker); }, numeric: true, width: '60px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (a) { return a.features['bottleneck ratio (in [0,1])']; }, text: function (a) { return fmt.pct(a.features['bottleneck ratio (in [0,1])']); }, numeric: true, width: '130px' },
                { label: 'normal worker\'s ratio', value: function (a) { return f(a.row.features, 'bottleneck ratio (in [0,1])'); }, text: function (a) { return fmt.pct(f(a.row.features, 'bottleneck ratio (in [0,1])')); }, numeric: true, width: '120px' },
                { label: 'avg throughput (%)', value: function (a) { return a.features['avg throughput (%)']; }, text: function (a) { return fmt.percent(a.features['avg throughput (%)']); }, numeric: true, width: '110px' },
                { label: 'throughput std (%)', value: function (a) { return a.features['throughput std (%)']; }, text: function (a) { return fmt.percent(a.features['throughput std (%)']); }, numeric: true, width: '110px' }]
    }) : el('p', { className: 'muted' }, 'None: every worker communicates like the others.'));
  }

  /* CUDA Runtime ------------------------------------------------------------------------- */
  function renderCudaRuntime(node, params) {
    var s = section('CUDA Runtime'), key = matchKey(params);
    heading(node, 'CUDA Runtime', 'One entry per CUDA runtime API the workers call (cudaLaunchKernel, cudaMemcpyAsync, …): the CPU-side cost of driving the GPU.', [
      ['avg bottleneck ratio (in [0,1])', 'on average, the share of end-to-end time in this call that does not overlap computation: time the GPU waited for the CPU to launch work.'],
      ['avg execution time / monitoring duration (in [0,1])', 'the share of the profiled window spent in this call, overlap included.'],
      ['abnormal_workers', 'workers whose bottleneck ratio is above 0.01 (1%), the threshold for runtime calls, with their ratio.']
    ]);
    node.appendChild(table({
      rows: entries(s), sort: { column: 1, descending: true },
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'API', value: function (e) { return e[0]; } },
                { label: 'avg bottleneck ratio (in [0,1])', value: function (e) { return e[1]['avg bottleneck ratio (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg bottleneck ratio (in [0,1])']); }, numeric: true, width: '210px' },
                { label: 'avg execution time / monitoring duration (in [0,1])', value: function (e) { return e[1]['avg execution time / monitoring duration (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg execution time / monitoring duration (in [0,1])']); }, numeric: true, width: '300px' },
                { label: 'abnormal_workers', value: function (e) { return entries(e[1].abnormal_workers).length; }, numeric: true, width: '130px' }]
    }));
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormalWorkersTable(abnormalMapRows(s), 'API', key, 'bottleneck ratio'));
  }

  /* Python functions --------------------------------------------------------------------- */
  function renderPython(node, params) {
    var s = section('Python functions'), key = matchKey(params);
    heading(node, 'Python functions', 'Python functions that take more than 1% of end-to-end time on some worker, not counting time that overlaps GPU compute, communication or other operations. Each is keyed by its full call stack, frames joined with "|", outermost first; the table shows the innermost frame, hover for the whole stack, click for the workers.', [
      ['value', 'for every worker over 1%, the share of end-to-end time this stack takes on it.']
    ]);
    var rows = entries(s).map(function (e) {
      var byWorker = entries(e[1]), shares = byWorker.map(function (w) { return w[1]; }), top = null;
      byWorker.forEach(function (w) { if (!top || w[1] > top[1]) top = w; }); /* the first of the largest */
      return { stack: e[0], workers: e[1], count: shares.length, max: PD.maxOf(shares, 0), median: PD.median(shares), top: top ? top[0] : '' };
    });
    var detail = el('div', { id: 'python-detail' });
    var showStack = function (r) {
      t.highlight(function (x) { return x === r; });
      detail.replaceChildren(el('div', { className: 'panel' },
        el('h2', null, 'Call stack'),
        el('ol', { className: 'stackframes' }, PD.stackFrames(r.stack).map(function (frame) { return el('li', null, frame); })),
        el('h3', null, 'Workers over 1%'),
        table({ rows: entries(r.workers), sort: { column: 2, descending: true }, visibleRows: 10,
                rowClass: function (e) { return culpritNames.has(e[0]) ? 'culprit' : ''; },
                columns: [{ label: 'worker', value: function (e) { return e[0]; }, render: function (e) { return workerCell(e[0]); } },
                          { label: 'rank', value: function (e) { return rankText(e[0]); }, numeric: true, width: '70px' },
                          { label: 'share of end-to-end time', value: function (e) { return e[1]; }, text: function (e) { return fmt.pct(e[1]); }, numeric: true }] })));
    };
    var t = new PD.Table({
      rows: rows, sort: { column: 3, descending: true }, filter: 'Filter by any frame', visibleRows: 14,
      onRowClick: showStack,
      columns: [{ label: 'call stack (innermost frame)', value: function (r) { return r.stack; }, render: function (r) { return el('span', { className: 'mono', title: PD.stackFrames(r.stack).join('\n') }, PD.shortStack(r.stack)); } },
                { label: 'frames', value: function (r) { return PD.stackFrames(r.stack).length; }, numeric: true, width: '70px' },
                { label: 'workers over 1%', value: function (r) { return r.count; }, numeric: true, width: '120px' },
                { label: 'max share', value: function (r) { return r.max; }, text: function (r) { return fmt.pct(r.max); }, numeric: true, width: '100px' },
                { label: 'median share', value: function (r) { return r.median; }, text: function (r) { return fmt.pct(r.median); }, numeric: true, width: '110px' },
                { label: 'top worker', value: function (r) { return r.top; }, width: '190px' }]
    });
    node.appendChild(t.node);
    node.appendChild(detail);
    var wanted = key !== null ? rows.find(function (r) { return r.stack === key; }) : null;
    if (wanted) mounted.push({ mount: function () { showStack(wanted); } });
  }

  /* Hardware ------------------------------------------------------------------------------- */
  function renderHardware(node, params) {
    var s = section('Hardware'), key = matchKey(params);
    var metrics = entries(s.metrics), perWorker = entries(s.workers), series = s.series || {};
    heading(node, 'Hardware', 'GPU, NVLink, PCIe and DRAM metrics the collector sampled during the profiled window (the seed samples every 100 µs).', [
      ['min/median/max', 'across workers, of each worker\'s average.'],
      ['per worker', 'each worker\'s average, minimum and maximum; a worker far from the others is worth a look next to the findings.'],
      ['samples', 'the metric over time for a few workers (the report keeps series for at most 64 workers): the culprits first.']
    ]);
    node.appendChild(table({
      rows: metrics, highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'metric', value: function (e) { return e[0]; } },
                { label: 'unit', value: function (e) { return e[1].unit; }, text: function (e) { return e[1].unit || '–'; }, width: '80px' },
                { label: 'min', value: function (e) { return (e[1]['min/median/max'] || [])[0]; }, text: function (e) { return fmt.num((e[1]['min/median/max'] || [])[0]); }, numeric: true },
                { label: 'median', value: function (e) { return (e[1]['min/median/max'] || [])[1]; }, text: function (e) { return fmt.num((e[1]['min/median/max'] || [])[1]); }, numeric: true },
                { label: 'max', value: function (e) { return (e[1]['min/median/max'] || [])[2]; }, text: function (e) { return fmt.num((e[1]['min/median/max'] || [])[2]); }, numeric: true }]
    }));
    if (perWorker.length) {
      node.appendChild(el('h2', null, 'Per worker (average)'));
      node.appendChild(table({
        rows: perWorker, filter: 'Filter workers', sort: { column: 1, descending: false },
        rowClass: function (e) { return culpritNames.has(e[0]) ? 'culprit' : ''; },
        columns: [{ label: 'worker', value: function (e) { return e[0]; }, render: function (e) { return workerCell(e[0]); }, width: '220px' },
                  { label: 'rank', value: function (e) { return rankText(e[0]); }, numeric: true, width: '70px' }]
          .concat(metrics.map(function (m) {
            return { label: m[0] + (m[1].unit ? ' (' + m[1].unit + ')' : ''), numeric: true,
                     value: function (e) { return ((e[1] || {})[m[0]] || {}).avg; }, text: function (e) { return fmt.num(((e[1] || {})[m[0]] || {}).avg); } };
          }))
      }));
    }
    var seriesWorkers = Object.keys(series);
    if (!seriesWorkers.length || !metrics.length) return;
    node.appendChild(el('h2', null, 'Samples over time'));
    var chosen = seriesWorkers.filter(function (n) { return culpritNames.has(n); })
      .concat(seriesWorkers.filter(function (n) { return !culpritNames.has(n); })).slice(0, 8);
    var select = el('select', { attrs: { 'aria-label': 'metric' } }, metrics.map(function (m) { return el('option', { value: m[0] }, m[0]); }));
    if (key !== null && metrics.some(function (m) { return m[0] === key; })) select.value = key;
    var holder = el('div');
    node.appendChild(el('p', null, 'Metric: ', select, el('span', { className: 'muted' }, ' · workers: ' + chosen.join(', '))));
    node.appendChild(holder);
    function draw() {
      var metric = select.value, unit = (s.metrics[metric] || {}).unit || '';
      var lines = chosen.map(function (n) { return { name: n, points: ((series[n] || {})[metric] || []) }; });
      charts.forEach(function (c) { c.dispose(); });
      charts = [];
      if (hasCharts) {
        var box = el('div', { className: 'chart' });
        holder.replaceChildren(box);
        var chart = window.echarts.init(box, null, { renderer: 'canvas' });
        chart.setOption({
          animation: false,
          tooltip: { trigger: 'axis', formatter: function (ps) {
            return PD.escapeHtml(fmt.num(ps[0].value[0]) + ' ms') + '<br>' + ps.map(function (p) { return p.marker + PD.escapeHtml(p.seriesName + ': ' + fmt.num(p.value[1]) + ' ' + unit); }).join('<br>');
          } },
          legend: { type: 'scroll', top: 0, formatter: function (n) { return n; } },
          /* Axis names inside the chart's box: the time unit centred under the axis (at its
           * end it ran past the right edge), the metric's unit above the y axis. */
          grid: { left: 60, right: 24, top: 48, bottom: 52 },
          xAxis: { type: 'value', name: 'time (ms)', nameLocation: 'middle', nameGap: 28 },
          yAxis: { type: 'value', name: unit, nameLocation: 'end', nameGap: 12, nameTextStyle: { align: 'left' } },
          dataZoom: [{ type: 'inside' }],
          series: lines.map(function (l) {
            return { name: l.name, type: 'line', showSymbol: false, sampling: 'lttb', data: l.points,
                     lineStyle: { width: culpritNames.has(l.name) ? 2.5 : 1 }, itemStyle: culpritNames.has(l.name) ? { color: '#c62828' } : undefined };
          })
        });
        charts.push(chart);
      } else {
        var plot = PD.linePlot({ series: lines.map(function (l) { return { name: l.name, points: l.points, color: culpritNames.has(l.name) ? '#c62828' : undefined }; }), unit: unit });
        holder.replaceChildren(plot.node);
        plot.mount();
      }
    }
    select.addEventListener('change', draw);
    mounted.push({ mount: draw });
  }

  /* Warnings and raw traces ------------------------------------------------------------------- */
  function renderWarnings(node) {
    heading(node, 'Warnings', 'Problems with the input that did not stop the analysis: a rank guessed from a file name, a trace cut short, a worker that never reported. The diagnosis above is only as complete as these allow.');
    node.appendChild(el('ul', { className: 'plain', id: 'warnings' }, (R.warnings || []).map(function (w) { return el('li', null, PD.richText(String(w))); })));
  }

  function rawTraceLink(path, shown) {
    /* Raw traces sit beside PerfDisplay/ (<out>/raw_trace/); both servers map /raw_trace/ there. */
    var href = location.protocol === 'file:' ? '../' + path : path;
    return el('a', { href: href, className: 'mono', title: path }, shown || path);
  }

  function exportedName(path) { return PD.stackFrames(path.replace(/\//g, '|')).pop().replace(/\.[^.]*$/, '') + '.json'; }
  function exportCommand(path) { return 'perftracker export ' + path + ' -o ' + exportedName(path); }

  function renderTraces(node) {
    var rows = workers.filter(function (w) { return w.raw_trace; });
    heading(node, 'Raw traces', 'The raw traces saved with --save-raw-trace (master: rank 0 only; all: every worker), for confirming a diagnosis by hand. One worker\'s trace can be hundreds of MB. To open one in Perfetto (ui.perfetto.dev) or chrome://tracing, convert it to Chrome trace JSON first:');
    node.appendChild(el('code', { className: 'cmd' }, 'perftracker export raw_trace/<file> -o <file>.json'));
    node.appendChild(table({
      rows: rows, filter: 'Filter workers',
      columns: [{ label: 'rank', value: function (w) { return w.rank; }, numeric: true, width: '70px' },
                { label: 'worker', value: function (w) { return w.name; } },
                /* The whole command, its raw trace a link to the file: one column, so the
                 * command stays whole and in view at 900 px. */
                { label: 'raw trace (the link), and the command converting it for Perfetto', value: function (w) { return w.raw_trace; },
                  title: function (w) { return exportCommand(w.raw_trace); },
                  render: function (w) { return el('span', { className: 'mono' }, 'perftracker export ', rawTraceLink(w.raw_trace), ' -o ' + exportedName(w.raw_trace)); } }]
    }));
  }

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
