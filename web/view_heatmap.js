/* view_heatmap.js -- the Heatmap view (#/heatmap, ?rank=N, ?key=<function>, ?finding=N):
 * workers x functions, each cell a worker's deviation from the median worker as a share of
 * the step. The drawing is plots.js's (PD.Heatmap); this file gives it the report's rows,
 * the finding's column and rank to show, and the links out (a row to its worker, a column
 * to the section view of its function).
 * Report keys: Heatmap (ranks, functions, values), diagnosis.findings, workers (names,
 * hosts); in the bounded form scale.nodes, a node's rows loaded from its parts when opened.
 * Cost: the canvas draws only the rows in view, so 4096 workers cost what a screenful does.
 *
 * Design: PD.views.heatmap(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.heatmap = function (ctx) {
  var el = PD.el;
  var findings = ctx.findings, scale = ctx.scale, culprits = ctx.culprits, mounted = ctx.mounted;
  var section = ctx.section, heading = ctx.heading, workerName = ctx.workerName, nodeOf = ctx.nodeOf,
      heatmapColumn = ctx.heatmapColumn, categoryView = ctx.categoryView, rankParam = ctx.rankParam,
      findingParam = ctx.findingParam;

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
    var findingIndex = findingParam(params), f = findings[findingIndex];
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
    var wantRank = rankParam(params);
    mounted.push({ node: heatmap.node, mount: function () {
                     heatmap.mount();
                     if (wantRank !== null) heatmap.scrollToRank(wantRank);
                     else if (focus !== null && findingIndex >= 0) heatmap.scrollToRank(focus);
                   },
                   destroy: function () { heatmap.destroy(); } });
  }

  return { render: renderHeatmap };
};
