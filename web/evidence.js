/* evidence.js -- what a finding rests on: the Evidence panel app.js puts at the top of the
 * view a finding links to (#/<view>?finding=N), and a hang finding's ranks side by side,
 * also drawn on its card in the Overview.
 *
 * From the report: a finding's summary and evidence (section, key, metric, values per rank,
 * median, hang: docs/report-schema.md); workers' names and status; for a function's
 * "bottleneck ms per step", the Heatmap section and job.median_step_time_ms. A figure is
 * called a median only when it is over every worker analysed (evidenceBaseline); otherwise
 * it is the finding's reference value, named so.
 * Cost: per opened view, one table (PD.Table: only the rows in view are drawn) and one pass
 * over the finding's values, plus one over the heatmap's ranks for a function's finding.
 *
 * Design: PD.evidence(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});

PD.evidence = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var job = ctx.job, byRank = ctx.byRank, workersAnalyzed = ctx.workersAnalyzed;
  var section = ctx.section, entries = ctx.entries, workerName = ctx.workerName, workerCell = ctx.workerCell,
      table = ctx.table, viewWidth = ctx.viewWidth;

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

  return { panel: evidencePanel, hangTable: hangTable };
};
