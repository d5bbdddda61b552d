/* view_inputs.js -- what the report says about its input: the Warnings view (#/warnings:
 * problems with the traces that did not stop the analysis) and the Raw traces view
 * (#/traces: the traces saved with --save-raw-trace, each a link beside the command that
 * converts it for Perfetto).
 * Report keys: warnings, workers (rank, name, raw_trace).
 * Cost: a list item per warning; one table of the workers with a raw trace (only the rows
 * in view are drawn).
 *
 * Design: PD.views.inputs(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.inputs = function (ctx) {
  var el = PD.el;
  var R = ctx.R, workers = ctx.workers;
  var heading = ctx.heading, table = ctx.table, rawTraceLink = ctx.rawTraceLink;

  /* Warnings and raw traces ------------------------------------------------------------------- */
  function renderWarnings(node) {
    heading(node, 'Warnings', 'Problems with the input that did not stop the analysis: a rank guessed from a file name, a trace cut short, a worker that never reported. The diagnosis above is only as complete as these allow.');
    node.appendChild(el('ul', { className: 'plain', id: 'warnings' }, (R.warnings || []).map(function (w) { return el('li', null, PD.richText(String(w))); })));
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

  return { warnings: renderWarnings, traces: renderTraces };
};
