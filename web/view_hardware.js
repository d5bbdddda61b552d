/* view_hardware.js -- the Hardware view (#/hardware, ?key=<metric>): the GPU, NVLink, PCIe
 * and DRAM metrics the collector sampled: min/median/max across workers, each worker's
 * average, and the samples over time of up to 8 workers (the culprits first), one metric at
 * a time (ECharts; PD.linePlot when the chart library is not bundled).
 * Report keys: Hardware (metrics, workers, series).
 * Cost: the tables draw only the rows in view; a chart of at most 8 series, downsampled by
 * the chart library (lttb), redrawn when another metric is chosen.
 *
 * Design: PD.views.hardware(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.hardware = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var culpritNames = ctx.culpritNames, hasCharts = ctx.hasCharts, charts = ctx.charts, mounted = ctx.mounted;
  var section = ctx.section, entries = ctx.entries, heading = ctx.heading, table = ctx.table, workerCell = ctx.workerCell,
      rankText = ctx.rankText, matchKey = ctx.matchKey;

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
      charts.length = 0; /* app.js's array, emptied in place */
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

  return { render: renderHardware };
};
