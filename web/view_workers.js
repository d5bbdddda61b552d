/* view_workers.js -- the Workers view (#/workers, ?rank=N opens one): one row per worker,
 * its step time split into exposed time by class, and a worker's detail when it is opened.
 *
 * Draws the breakdown chart (ECharts, a stacked bar per worker), the workers table (the
 * class of the finding the reader came from marked, its column scrolled into view) and a
 * worker's detail: the findings naming it, its steps as a table and a chart, its raw
 * trace. In the bounded form, also the distributions over every worker and the nodes; a
 * worker's detail is then loaded from its part when it is opened (scale.js).
 * Report keys: workers (rank, name, status, step_time_ms, gpu_utilization, breakdown,
 * steps, host, local_rank, pid, rank_source, raw_trace), diagnosis (verdict, findings),
 * scale (worker_table, distributions, nodes).
 * Cost: the table draws only the rows in view (PD.Table), so 4096 workers cost what a
 * screenful does; the chart has at most CHART_BARS bars, a bar then standing for a run of
 * consecutive ranks; the name column is as wide as the longest name, one measured per length.
 *
 * Design: PD.views.workers(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.workers = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var diagnosis = ctx.diagnosis, findings = ctx.findings, workers = ctx.workers, analyzed = ctx.analyzed,
      listedWorkers = ctx.listedWorkers, scale = ctx.scale, byRank = ctx.byRank, culprits = ctx.culprits,
      sampled = ctx.sampled, hasCharts = ctx.hasCharts, mounted = ctx.mounted;
  var heading = ctx.heading, table = ctx.table, viewWidth = ctx.viewWidth, chartBox = ctx.chartBox,
      chartPart = ctx.chartPart, breakdownBar = ctx.breakdownBar, breakdownLegend = ctx.breakdownLegend,
      quantile = ctx.quantile, sampleNote = ctx.sampleNote, rawTraceLink = ctx.rawTraceLink,
      rankParam = ctx.rankParam, findingParam = ctx.findingParam;

  /* Workers --------------------------------------------------------------------------- */
  /* The breakdown class a finding is about, for the Workers table's marked column. */
  var CLASS_OF_CATEGORY = { gpu_compute: 'compute_ms', gpu_memory: 'memory_ms', communication: 'communication_ms',
                            cuda_runtime: 'runtime_ms', python: 'python_ms', cpu_bound: 'python_ms', host: 'runtime_ms' };

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
    var wantRank = rankParam(params);
    var maxStep = PD.maxOf(workers.map(function (w) { return w.step_time_ms || 0; }), 0);
    /* The class of the finding the reader came from (else the root cause's): its column
     * is marked. The columns up to idle fit 1400 px; the rest scroll, the rank column
     * staying in place. */
    var findingIndex = findingParam(params);
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

  return { render: renderWorkers };
};
