/* scale.js -- the bounded form of a report (docs/report-schema.md, "The bounded form"):
 * what the page reads when a job has more workers than report.json lists in full.
 *
 * Above 4096 workers report.json keeps full detail only for the workers it is about (named,
 * outlying, listed); every analysed worker is one row of scale.worker_table (columns, rank
 * order), every node one row of scale.nodes and of Heatmap.nodes, and each worker's full
 * detail sits in a part, PerfDisplay/parts/workers-NNNN.js, a script that fills
 * window.PT_REPORT_PARTS[NNNN]. The page loads a part only when a worker or a node in it is
 * opened, with a <script> tag (fetch() does not work from file://), once.
 *
 * Design: nothing here trusts the report's shape. The table's columns must be arrays of one
 * length, a node index must name a node, part files are plain names inside the parts
 * folder; anything else makes the page fall back to what "workers" holds, and a part that
 * does not load or does not hold the ranks asked for is an error the caller shows.
 */
'use strict';
var PD = (window.PD = window.PD || {});

(function () {
  var SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

  /* report.scale when the report is in the bounded form and its worker table is usable. */
  PD.boundedScale = function (report) {
    var s = report && report.scale;
    if (!s || typeof s !== 'object' || s.form !== 'bounded') return null;
    var t = s.worker_table;
    if (!t || !Array.isArray(t.rank)) return null;
    var n = t.rank.length;
    var ok = ['name', 'node', 'local_rank', 'step_time_ms', 'gpu_utilization', 'status'].every(function (k) {
      return t[k] === undefined || (Array.isArray(t[k]) && t[k].length === n);
    });
    return ok && Array.isArray(s.nodes) ? s : null;
  };

  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function str(v) { return typeof v === 'string' ? v : null; }

  /* One row object per analysed worker: its full-detail entry where "workers" has one,
   * else what the table says (marked summary: true, its part to load for the rest). */
  PD.workerTableRows = function (scale, detailed) {
    var t = scale.worker_table, nodes = scale.nodes, full = new Map(), rows = new Array(t.rank.length);
    detailed.forEach(function (w) { if (w && typeof w.rank === 'number') full.set(w.rank, w); });
    var col = function (k, i) { return t[k] ? t[k][i] : undefined; };
    for (var i = 0; i < rows.length; i++) {
      var rank = t.rank[i], nodeIndex = col('node', i), node = Number.isInteger(nodeIndex) ? nodes[nodeIndex] : null;
      var host = node && typeof node.host === 'string' ? node.host : null;
      var w = full.get(rank);
      if (w) { if (!w.host) w.host = host; rows[i] = w; continue; }
      rows[i] = { rank: rank, name: str(col('name', i)), host: host, local_rank: num(col('local_rank', i)),
                  step_time_ms: num(col('step_time_ms', i)), gpu_utilization: num(col('gpu_utilization', i)),
                  status: str(col('status', i)), rank_source: null, summary: true };
    }
    return rows;
  };

  /* The table's workers and the entries it does not hold ("missing", "error"), by rank. */
  PD.withUnanalyzed = function (tableRows, detailed) {
    var inTable = new Set(tableRows.map(function (w) { return w.rank; }));
    var extra = detailed.filter(function (w) { return w && !inTable.has(w.rank); });
    if (!extra.length) return tableRows;
    return tableRows.concat(extra).sort(function (a, b) { return a.rank - b.rank; });
  };

  /* Per node: its name, its ranks (from the table), its heatmap row. Heatmap.nodes is
   * columns ({hosts, values: [row per node], shares}, as perftracker writes it) or a list
   * of {values, shares}; both are read. */
  PD.scaleNodes = function (scale, heatmap) {
    var t = scale.worker_table, members = scale.nodes.map(function () { return []; });
    if (Array.isArray(t.node)) {
      for (var i = 0; i < t.rank.length; i++) { var k = t.node[i]; if (Number.isInteger(k) && members[k]) members[k].push(t.rank[i]); }
    }
    var given = heatmap && heatmap.nodes, list = Array.isArray(given) ? given : null;
    var cols = !list && given && typeof given === 'object' ? given : {};
    var pick = function (i, k) {
      var v = list ? (list[i] || {})[k] : Array.isArray(cols[k]) ? cols[k][i] : null;
      return Array.isArray(v) ? v : [];
    };
    return scale.nodes.map(function (n, i) {
      return { name: n && typeof n.host === 'string' ? n.host : 'node ' + i, ranks: members[i], values: pick(i, 'values'), shares: pick(i, 'shares') };
    });
  };

  /* Parts --------------------------------------------------------------------------- */
  var loading = new Map();

  function partScript(scale, index) {
    var parts = scale.parts || {}, files = Array.isArray(parts.files) ? parts.files : [];
    var folder = typeof parts.folder === 'string' && SAFE_NAME.test(parts.folder) ? parts.folder : null;
    var file = files[index] && typeof files[index].file === 'string' ? files[index].file : null;
    if (!folder || !file || !SAFE_NAME.test(file)) return null;
    return folder + '/' + file.replace(/\.json$/, '') + '.js';
  }

  /* A promise of part index's data ({workers, heatmap, hardware}); rejects with a sentence. */
  PD.loadPart = function (scale, index) {
    if (loading.has(index)) return loading.get(index);
    var done = new Promise(function (resolve, reject) {
      var src = Number.isInteger(index) ? partScript(scale, index) : null;
      if (!src) { reject(new Error('this report names no part for these workers')); return; }
      var have = function () { var p = (window.PT_REPORT_PARTS || {})[index]; return p && Array.isArray(p.workers) ? p : null; };
      if (have()) { resolve(have()); return; }
      var script = document.createElement('script');
      script.src = src;
      script.onload = function () { if (have()) resolve(have()); else reject(new Error(src + ' does not hold part ' + index)); };
      script.onerror = function () { reject(new Error(src + ' could not be loaded (the parts folder is written by perftracker analyze)')); };
      document.head.appendChild(script);
    });
    done.catch(function () { loading.delete(index); }); /* a later click tries again */
    loading.set(index, done);
    return done;
  };

  /* The full-detail entry of rank, from the part holding it. */
  PD.loadWorker = function (scale, rank) {
    var index = PD.partsOf(scale, [rank])[0];
    return PD.loadPart(scale, index).then(function (part) {
      var w = part.workers.find(function (x) { return x && x.rank === rank; });
      if (!w) throw new Error('part ' + index + ' does not hold rank ' + rank);
      return w;
    });
  };

  /* The heatmap rows of ranks, from the parts covering them: {rank: {values, shares}}. */
  PD.loadHeatmapRows = function (scale, parts, ranks) {
    return Promise.all(parts.map(function (i) { return PD.loadPart(scale, i); })).then(function (loaded) {
      var want = new Set(ranks), rows = new Map();
      loaded.forEach(function (part) {
        var h = part.heatmap || {}, r = Array.isArray(h.ranks) ? h.ranks : [];
        r.forEach(function (rank, i) {
          if (want.has(rank)) rows.set(rank, { values: (h.values || [])[i] || [], shares: (h.shares || [])[i] || [] });
        });
      });
      return rows;
    });
  };

  /* The parts holding ranks (scale.parts.files[].ranks: [first, last]). */
  PD.partsOf = function (scale, ranks) {
    var files = (scale.parts || {}).files || [], out = [];
    files.forEach(function (f, i) {
      var r = f && Array.isArray(f.ranks) ? f.ranks : null;
      if (r && ranks.some(function (x) { return x >= r[0] && x <= r[1]; })) out.push(i);
    });
    return out;
  };
})();
