/* view_timeline.js -- the Step timeline view (#/timeline, ?rank=N scrolls to one): one row
 * per rank, its profiled steps as the stretches it worked and waited up to each sync point,
 * the rank that sets the step outlined. The drawing is timeline.js's (PD.Timeline); this
 * file chooses the rows and says how to read them.
 * Report keys: workers (steps, with their syncs), diagnosis.step_model (step_ms, pace);
 * in the bounded form only the workers report.json holds in full detail are rows.
 * Cost: one pass over the workers for the rows (app.js's navigation asks for them too, to
 * leave the view out when no worker has steps); the canvas draws only the rows in view.
 *
 * Design: PD.views.timeline(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.timeline = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var diagnosis = ctx.diagnosis, analyzed = ctx.analyzed, listedWorkers = ctx.listedWorkers, scale = ctx.scale,
      culprits = ctx.culprits, mounted = ctx.mounted;
  var heading = ctx.heading, rankParam = ctx.rankParam;

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
    var wantRank = rankParam(params);
    mounted.push({ node: timeline.node, mount: function () { timeline.mount(); if (wantRank !== null) timeline.scrollToRank(wantRank); },
                   destroy: function () { timeline.destroy(); } });
  }

  return { render: renderTimeline, rows: timelineRows };
};
