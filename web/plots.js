/* plots.js -- the drawings PerfDisplay makes itself, on canvas: the workers x functions
 * heatmap, the per-rank bar plot, and a plain line plot for when no chart library is
 * bundled. They must work offline and without the chart library, and stay fast with 4096
 * workers, so they are drawn directly rather than through a general chart library.
 *
 * Heatmap design: one canvas the size of the viewport draws only the rows in view; a
 * spacer gives the scroll bar its full height (rows x row height). Row labels and column
 * headers are HTML (text, hover titles, clickable) positioned over the same grid: the
 * label gutter is as wide as the longest label, column labels stand upright in their
 * column (innermost frame first, the full name on hover) under a header as tall as the
 * longest, and a small job gets taller rows and wider columns rather than a thin strip.
 * An overview strip beside it maps every row to at most one pixel, keeping for each pixel
 * the largest deviation among its rows, so one slow worker in 4096 shows as a red tick
 * without scrolling. Cost per frame: visible rows x functions fillRect calls.
 * Above GROUP_ABOVE ranks (or when the report gives nodes, its bounded form) the rows are
 * nodes: this.order is a list of row objects, each node followed by its ranks when it is
 * opened, so 100,000 ranks are 12,500 rows and a node's ranks one click away; a node's
 * cells are its most deviating rank's, so a straggler still colours its row.
 */
'use strict';
var PD = (window.PD = window.PD || {});

(function () {
  var GROUP_ABOVE = 512, MIN_ROW_H = 16, MAX_ROW_H = 48, SMALL_JOB_H = 260, MIN_COL_W = 16, MAX_COL_W = 72, MIN_SCALE = 0.05;
  var MIN_GUTTER = 120, MAX_GUTTER = 360, LABEL_CHARS = 34, MAX_HEADER = 250;
  var ROW_FONT = '11px ui-monospace, Menlo, Consolas, monospace';

  var measurer = null;
  function textWidth(text, font) {
    measurer = measurer || document.createElement('canvas').getContext('2d');
    measurer.font = font;
    return measurer.measureText(text).width;
  }

  /* A heatmap column's label: the function shortened by its kind (a Python stack reads
   * innermost frame first). */
  PD.heatmapLabel = function (fn) {
    if (fn.category === 'gpu_compute') return PD.shortKernel(PD.splitKernelKey(String(fn.name)).name, LABEL_CHARS);
    return PD.shortFunction(fn.category, fn.name, LABEL_CHARS);
  };

  var setupCanvas = PD.setupCanvas;

  function mix(a, b, t) {
    return 'rgb(' + [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * t); }).join(',') + ')';
  }
  var WHITE = [255, 255, 255], RED = [198, 40, 40], BLUE = [36, 86, 197], PURPLE = [59, 31, 122];

  /* Deviation: red when a worker spends longer than the median worker, blue when shorter.
   * Linear, so the noise between healthy workers stays near white and an outlier does not. */
  PD.deviationColor = function (v, scale) {
    if (typeof v !== 'number' || !isFinite(v)) return '#e4e7ec';
    return mix(WHITE, v >= 0 ? RED : BLUE, Math.min(1, Math.abs(v) / scale));
  };
  PD.shareColor = function (v, scale) {
    if (typeof v !== 'number' || !isFinite(v)) return '#e4e7ec';
    return mix(WHITE, PURPLE, Math.sqrt(Math.min(1, Math.max(0, v) / scale)));
  };

  /* Heatmap ------------------------------------------------------------------------- */

  /* options: {heatmap: report.Heatmap, workerName(rank), culprits: Set of ranks,
   *           highlightColumn: index or -1, onRowClick(rank), onColumnClick(index),
   *           nodeOf(rank) -> the rank's node (host) or null: many ranks are then shown
   *           as one row per node, which opens onto its ranks (drill-down)} */
  function Heatmap(options) {
    var h = options.heatmap, self = this;
    this.options = options;
    this.functions = h.functions || [];
    this.ranks = h.ranks || [];
    this.matrices = { values: h.values || [], shares: h.shares || [] };
    /* One worker has no median to deviate from: its time shares are what there is. */
    this.mode = this.ranks.length >= 2 ? 'values' : 'shares';
    this.rowH = Math.max(MIN_ROW_H, Math.min(MAX_ROW_H, Math.floor(SMALL_JOB_H / Math.max(1, this.ranks.length))));
    this.culprits = options.culprits || new Set();
    this.highlightColumn = options.highlightColumn >= 0 ? options.highlightColumn : -1;
    this.rowExcess = PD.heatmapExcess(h);
    this.scales = { values: Math.max(MIN_SCALE, matrixMaxAbs(h.values, this.functions)),
                    shares: Math.max(1e-3, matrixMax(h.shares)) };
    this.rankRows = this.ranks.map(function (rank, i) {
      return { kind: 'rank', rank: rank, index: i, excess: self.rowExcess[i], culprit: self.culprits.has(rank) };
    });
    if (Array.isArray(options.nodes)) { /* the bounded form: nodes as the report gives them */
      this.nodes = givenNodes(options.nodes, this.rankRows, this.culprits, this.functions);
      this.allRanks = this.nodes.length > 0;
    } else {
      this.nodes = groupByNode(this.rankRows, options.nodeOf, this.functions.length, this.matrices);
    }
    this.grouped = this.nodes.length > 0 && (this.allRanks || this.ranks.length > GROUP_ABOVE);
    /* Rows as tall as the rows there are allow: nodes count (a bounded report may hold a
     * handful of ranks in full and thousands of nodes). */
    this.rowH = Math.max(MIN_ROW_H, Math.min(MAX_ROW_H, Math.floor(SMALL_JOB_H / Math.max(1, this.ranks.length, this.nodes.length))));
    this.orderName = 'rank';
    this.arrange();
    this.build();
  }

  /* Rows by node: each node a row whose cell is its most deviating rank's (the largest
   * |deviation|, the largest share), so one slow GPU among 100,000 still colours its
   * node's row. Only worth it when nodes hold several ranks each. */
  function groupByNode(rows, nodeOf, f, matrices) {
    if (typeof nodeOf !== 'function') return [];
    var byNode = new Map(), nodes = [];
    for (var i = 0; i < rows.length; i++) {
      var name = nodeOf(rows[i].rank);
      if (name === null || name === undefined || name === '') return [];
      var node = byNode.get(name);
      if (!node) {
        node = { kind: 'node', name: String(name), members: [], excess: 0, culprit: false, expanded: false,
                 values: new Array(f).fill(null), shares: new Array(f).fill(null), worst: new Array(f).fill(null) };
        byNode.set(name, node);
        nodes.push(node);
      }
      node.members.push(rows[i]);
      rows[i].node = node;
      if (rows[i].excess > node.excess) node.excess = rows[i].excess;
      if (rows[i].culprit) node.culprit = true;
      var v = matrices.values[rows[i].index] || [], s = matrices.shares[rows[i].index] || [];
      for (var j = 0; j < f; j++) {
        if (typeof v[j] === 'number' && (node.values[j] === null || Math.abs(v[j]) > Math.abs(node.values[j]))) { node.values[j] = v[j]; node.worst[j] = rows[i].rank; }
        if (typeof s[j] === 'number' && (node.shares[j] === null || s[j] > node.shares[j])) node.shares[j] = s[j];
      }
    }
    return nodes.length >= 2 && nodes.length < rows.length ? nodes : []; /* one node, or one rank a node: nothing to group */
  }

  /* Nodes whose rows the report holds (Heatmap.nodes) and whose ranks are mostly not in
   * the matrix: a rank row without values is drawn grey until its node is opened and
   * options.loadNode fills it (rowsLoaded). */
  function givenNodes(given, rankRows, culprits, functions) {
    var byRank = new Map(rankRows.map(function (r) { return [r.rank, r]; }));
    var excess = PD.heatmapExcess({ functions: functions, ranks: given.map(function (_, i) { return i; }),
                                    values: given.map(function (n) { return n.values; }) });
    return given.map(function (g, i) {
      var node = { kind: 'node', name: String(g.name), members: [], excess: excess[i], culprit: false, expanded: false,
                   values: g.values, shares: g.shares, worst: new Array(functions.length).fill(null), source: g };
      (g.ranks || []).forEach(function (rank) {
        var row = byRank.get(rank) || { kind: 'rank', rank: rank, index: -1, excess: 0, culprit: culprits.has(rank) };
        row.node = node;
        node.members.push(row);
        if (row.culprit) node.culprit = true;
      });
      return node;
    });
  }

  /* The rows in display order (this.order): every rank, or the nodes with the ranks of
   * the opened ones under them; by rank, or by largest excess first. */
  Heatmap.prototype.arrange = function () {
    var byExcess = this.orderName === 'deviation';
    function sorted(rows) { /* stable: ties keep rank order */
      if (!byExcess) return rows;
      return rows.map(function (r, i) { return { r: r, i: i }; })
        .sort(function (a, b) { return b.r.excess - a.r.excess || a.i - b.i; }).map(function (x) { return x.r; });
    }
    if (!this.grouped) { this.order = sorted(this.rankRows); }
    else {
      var order = [];
      sorted(this.nodes).forEach(function (node) {
        order.push(node);
        if (node.expanded) sorted(node.members).forEach(function (r) { order.push(r); });
      });
      this.order = order;
    }
    this.orderVersion = (this.orderVersion || 0) + 1;
    if (this.spacer) this.spacer.style.height = this.order.length * this.rowH + 'px';
  };

  Heatmap.prototype.rowValues = function (row, mode) {
    if (row.kind === 'node' || row[mode]) return row[mode] || [];
    return row.index >= 0 ? this.matrices[mode][row.index] || [] : [];
  };

  /* The rows options.loadNode brought for a node's ranks: Map rank -> {values, shares}. */
  Heatmap.prototype.rowsLoaded = function (node, rows) {
    var fns = this.functions;
    node.members.forEach(function (row) {
      var got = rows.get(row.rank);
      if (!got || row.index >= 0) return;
      row.values = got.values;
      row.shares = got.shares;
      row.excess = PD.heatmapExcess({ functions: fns, ranks: [row.rank], values: [got.values] })[0];
    });
    node.loaded = true;
    this.arrange();
    this.render();
  };

  /* Opens or closes a node's ranks under it. */
  Heatmap.prototype.toggleNode = function (node, open) {
    node.expanded = open === undefined ? !node.expanded : open;
    this.requestRows(node);
    this.arrange();
    this.render();
  };

  Heatmap.prototype.requestRows = function (node) {
    var self = this;
    if (!node.expanded || node.loaded || node.requested || !this.options.loadNode) return;
    node.requested = true;
    this.options.loadNode(node.source).then(function (rows) { self.rowsLoaded(node, rows); }, function (e) {
      node.requested = false;
      node.error = String(e && e.message || e);
      self.render();
    });
  };

  Heatmap.prototype.setGrouped = function (grouped) {
    this.grouped = grouped && this.nodes.length > 0;
    this.arrange();
    this.updateButtons();
    this.scroll.scrollTop = 0;
    this.render();
  };

  /* The colour scale: the largest |deviation| outside communication. Collectives are left
   * out because waiting inflates them (a straggler's peers wait ~its whole excess in one
   * all-reduce) and would wash out the cells that show what the straggler does instead;
   * communication cells beyond the scale are drawn at full colour. */
  function matrixMaxAbs(m, functions) {
    var best = 0, any = false;
    var skip = functions.map(function (f) { return f.category === 'communication'; });
    if (skip.every(Boolean)) skip = skip.map(function () { return false; });
    (m || []).forEach(function (row) {
      (row || []).forEach(function (v, j) {
        if (!skip[j] && typeof v === 'number' && Math.abs(v) > best) { best = Math.abs(v); any = true; }
      });
    });
    return any ? best : 0;
  }

  /* Per rank, its largest excess over the median worker in any function that is not
   * communication, as a share of step time. Communication is left out on purpose: in a
   * synchronous job the workers that wait for a straggler spend longer in collectives, so
   * a worker is judged by what it does instead of waiting (the paper's rule). */
  PD.heatmapExcess = function (h) {
    var fns = h.functions || [];
    return (h.ranks || []).map(function (_, i) {
      var row = (h.values || [])[i] || [], m = 0;
      for (var j = 0; j < row.length; j++)
        if (typeof row[j] === 'number' && row[j] > m && (fns[j] || {}).category !== 'communication') m = row[j];
      return m;
    });
  };
  function matrixMax(m) {
    var best = 0;
    (m || []).forEach(function (row) { (row || []).forEach(function (v) { if (typeof v === 'number' && v > best) best = v; }); });
    return best;
  }

  Heatmap.prototype.build = function () {
    var el = PD.el, self = this;
    this.modeButtons = {
      values: el('button', { onclick: function () { self.setMode('values'); } }, 'Deviation from median'),
      shares: el('button', { onclick: function () { self.setMode('shares'); } }, 'Time share')
    };
    this.orderButtons = {
      rank: el('button', { onclick: function () { self.setOrder('rank'); } }, 'By rank'),
      deviation: el('button', { onclick: function () { self.setOrder('deviation'); } }, 'Largest excess first')
    };
    this.groupButtons = this.nodes.length ? {
      node: el('button', { onclick: function () { self.setGrouped(true); } }, 'By node (' + this.nodes.length + ')'),
      rank: el('button', { onclick: function () { self.setGrouped(false); } }, this.allRanks ? 'Workers in full detail (' + this.ranks.length + ')' : 'Every rank')
    } : null;
    this.legendCanvas = el('canvas');
    this.legendText = el('span', { className: 'muted' });
    var toolbar = el('div', { className: 'legend heatmap-legend' },
      'Colour:', this.modeButtons.values, this.modeButtons.shares,
      el('span', null, ' Rows:'), this.orderButtons.rank, this.orderButtons.deviation,
      this.groupButtons ? [el('span', null, ' Group:'), this.groupButtons.node, this.groupButtons.rank] : null,
      this.legendCanvas, this.legendText);
    this.cols = el('div', { className: 'cols' });
    this.canvas = el('canvas', { attrs: { 'aria-label': 'workers by functions heatmap', role: 'img' } });
    this.labels = el('div', { className: 'labels' });
    this.spacer = el('div', { style: { height: this.order.length * this.rowH + 'px' } });
    this.scroll = el('div', { className: 'scroll' }, el('div', { className: 'sticky' }, this.canvas, this.labels), this.spacer);
    this.overview = el('canvas', { className: 'overview', title: 'Every worker at once: its largest excess outside communication (several workers per pixel row when there are many; the largest shows). Click to jump.' });
    this.grid = el('div', { className: 'grid' }, this.cols, this.scroll);
    this.gutter = this.measureGutter();
    this.node = el('div', { id: 'heatmap', className: 'heatmap-wrap' }, toolbar,
      this.box = el('div', { className: 'heatmap', style: { '--gutter': this.gutter + 'px' } }, el('div', { className: 'hscroll' }, this.grid), this.overview));
    this.node.dataset.culprits = Array.from(this.culprits).sort(function (a, b) { return a - b; }).join(',');
    this.node.ptHeatmap = this;

    this.scroll.addEventListener('scroll', function () { self.schedule(); }, { passive: true });
    this.canvas.addEventListener('mousemove', function (e) { self.hover(e); });
    this.canvas.addEventListener('mouseleave', function () { PD.tooltip.hide(); });
    this.canvas.addEventListener('click', function (e) {
      var cell = self.cellAt(e);
      if (cell) self.rowClick(cell.row);
    });
    this.overview.addEventListener('click', function (e) {
      var r = self.overview.getBoundingClientRect();
      var index = Math.floor((e.clientY - r.top) / r.height * self.order.length);
      self.scrollToIndex(Math.max(0, Math.min(self.order.length - 1, index)));
    });
    this.resizeListener = function () { self.layout(); };
    window.addEventListener('resize', this.resizeListener);
    this.updateButtons();
  };

  /* A row's label, "▶ 3 · host_3_4711.json", its name shortened in the middle to fit. */
  Heatmap.prototype.rowLabel = function (rank) {
    var head = (this.culprits.has(rank) ? '▶ ' : '') + rank + ' · ', name = String(this.options.workerName(rank));
    return head + this.fitName(name, this.labelChars - head.length);
  };
  /* A node's row label, "▸ node12 · 8 ranks" (▾ when open). */
  Heatmap.prototype.nodeLabel = function (node) {
    var head = (node.culprit ? '▶ ' : '') + (node.expanded ? '▾ ' : '▸ '), tail = ' · ' + node.members.length + ' ranks';
    return head + this.fitName(node.name, this.labelChars - head.length - tail.length) + tail;
  };
  Heatmap.prototype.fitName = function (name, room) {
    room = Math.max(4, room);
    if (name.length > room) name = name.slice(0, Math.ceil((room - 1) * 0.6)) + '…' + name.slice(name.length - Math.floor((room - 1) * 0.4));
    return name;
  };

  Heatmap.prototype.rowClick = function (row) {
    if (row.kind === 'node') this.toggleNode(row);
    else if (this.options.onRowClick) this.options.onRowClick(row.rank);
  };

  /* The label gutter: as wide as the longest label (its name in up to 40 characters). */
  Heatmap.prototype.measureGutter = function () {
    var self = this, longest = 0;
    this.ranks.forEach(function (rank) {
      var n = String(rank).length + 3 + (self.culprits.has(rank) ? 2 : 0) + Math.min(40, String(self.options.workerName(rank)).length);
      if (n > longest) longest = n;
    });
    this.nodes.forEach(function (node) {
      var n = 4 + Math.min(40, node.name.length) + 9 + String(node.members.length).length;
      if (n > longest) longest = n;
    });
    var charW = textWidth('0123456789', ROW_FONT) / 10;
    this.labelChars = Math.max(8, Math.min(longest, Math.floor((MAX_GUTTER - 12) / charW)));
    return Math.max(MIN_GUTTER, Math.min(MAX_GUTTER, Math.ceil(this.labelChars * charW) + 12));
  };

  /* Called once the node is in the document (sizes are known only then). */
  Heatmap.prototype.mount = function () { this.layout(); };
  Heatmap.prototype.destroy = function () { window.removeEventListener('resize', this.resizeListener); };

  Heatmap.prototype.layout = function () {
    var width = (this.box.clientWidth || 850) - 50; /* less the overview strip */
    var f = Math.max(1, this.functions.length), gutter = this.gutter;
    this.colW = Math.max(MIN_COL_W, Math.min(MAX_COL_W, Math.floor((width - gutter - 2) / f)));
    this.viewH = Math.min((this.ranks.length + this.nodes.length) * this.rowH, Math.max(240, window.innerHeight - 330));
    this.scroll.style.height = this.viewH + 'px';
    /* Whole, however wide: past the view's width, .hscroll scrolls it sideways. */
    this.grid.style.width = (gutter + f * this.colW + 2) + 'px';
    this.ctx = setupCanvas(this.canvas, f * this.colW, this.viewH);
    this.buildColumns();
    this.octx = setupCanvas(this.overview, 36, this.viewH);
    this.overview.style.marginTop = this.cols.offsetHeight + 'px';
    this.render();
  };

  /* Column labels stand upright (read bottom to top) inside their column, under a
   * header as tall as the longest label; the full name is the column's title. */
  Heatmap.prototype.buildColumns = function () {
    var el = PD.el, self = this, tallest = 0;
    this.cols.replaceChildren();
    this.functions.forEach(function (fn, j) {
      var full = (fn.category || '') + ': ' + fn.name, label = PD.heatmapLabel(fn);
      var col = el('div', {
        className: 'col' + (j === self.highlightColumn ? ' hl' : ''), title: full,
        style: { left: j * self.colW + 'px', width: self.colW + 'px' },
        dataset: { index: j, category: fn.category || '' },
        onclick: function () { if (self.options.onColumnClick) self.options.onColumnClick(j); }
      }, el('span', null, label));
      self.cols.appendChild(col);
    });
    /* The labels' own height as the page's font draws them (they are in the document). */
    Array.prototype.forEach.call(this.cols.querySelectorAll('span'), function (span) { tallest = Math.max(tallest, span.offsetHeight); });
    this.cols.style.height = Math.min(MAX_HEADER, Math.ceil(tallest || 120) + 12) + 'px';
  };

  Heatmap.prototype.schedule = function () {
    var self = this;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(function () { self.scheduled = false; self.render(); });
  };

  Heatmap.prototype.render = function () {
    if (!this.ctx) return;
    var ctx = this.ctx, matrix = this.matrices[this.mode], scale = this.scales[this.mode];
    var color = this.mode === 'values' ? PD.deviationColor : PD.shareColor;
    var rowH = this.rowH, top = this.scroll.scrollTop, first = Math.floor(top / rowH), offset = top - first * rowH;
    var rowsInView = Math.ceil(this.viewH / rowH) + 1, f = this.functions.length, colW = this.colW;
    var el = PD.el, self = this;
    ctx.clearRect(0, 0, f * colW, this.viewH);
    var labels = document.createDocumentFragment();
    for (var k = 0; k < rowsInView && first + k < this.order.length; k++) {
      var entry = this.order[first + k], y = k * rowH - offset, row = this.rowValues(entry, this.mode);
      for (var j = 0; j < f; j++) {
        ctx.fillStyle = color(row[j], scale);
        ctx.fillRect(j * colW, y, colW - 1, rowH - 1);
      }
      if (entry.culprit) {
        ctx.strokeStyle = '#c62828';
        ctx.lineWidth = 2;
        ctx.strokeRect(1, y + 1, f * colW - 2, rowH - 2);
      }
      labels.appendChild(this.labelNode(entry, y));
    }
    if (this.highlightColumn >= 0) {
      ctx.strokeStyle = '#e8b400';
      ctx.lineWidth = 2;
      ctx.strokeRect(this.highlightColumn * colW + 1, 0, colW - 2, this.viewH);
    }
    this.labels.replaceChildren(labels);
    this.canvas.dataset.firstRow = String(first);
    this.renderOverview(first, rowsInView);
  };

  Heatmap.prototype.labelNode = function (entry, y) {
    var self = this, isNode = entry.kind === 'node', rowH = this.rowH;
    var member = !isNode && this.grouped;
    return PD.el('div', {
      className: 'rowlabel' + (entry.culprit ? ' culprit' : '') + (isNode ? ' node' : '') + (member ? ' member' : ''),
      title: isNode ? 'node ' + entry.name + ' · ' + entry.members.length + ' ranks (' + (entry.expanded ? 'click to close' : 'click for its ranks') + ')' +
                      (entry.error ? '\n' + entry.error : entry.expanded && entry.requested && !entry.loaded ? '\nloading its ranks…' : '')
                    : 'rank ' + entry.rank + ' · ' + this.options.workerName(entry.rank),
      style: { top: y + 'px', height: rowH + 'px', 'line-height': rowH + 'px' },
      dataset: isNode ? { node: entry.name, ranks: entry.members.length } : { rank: entry.rank },
      attrs: isNode ? { 'aria-expanded': String(entry.expanded) } : null,
      onclick: function () { self.rowClick(entry); }
    }, isNode ? this.nodeLabel(entry) : this.rowLabel(entry.rank));
  };

  /* The strip: per pixel row, the largest excess among its workers. The buckets change only
   * with the order or the size, so they are computed then, not on every scroll frame. */
  Heatmap.prototype.overviewBuckets = function () {
    var n = this.order.length, buckets = Math.min(n, this.viewH);
    var key = this.orderVersion + ':' + buckets;
    if (this.bucketKey === key) return this.buckets;
    var excess = new Array(buckets).fill(0), culprit = new Array(buckets).fill(false);
    this.order.forEach(function (row, pos) {
      var b = Math.floor(pos * buckets / n);
      if (row.excess > excess[b]) excess[b] = row.excess;
      if (row.culprit) culprit[b] = true;
    });
    this.bucketKey = key;
    this.buckets = { count: buckets, excess: excess, culprit: culprit };
    return this.buckets;
  };

  Heatmap.prototype.renderOverview = function (first, rowsInView) {
    var ctx = this.octx, n = this.order.length, h = this.viewH, w = 36;
    if (!ctx || !n) return;
    var buckets = this.overviewBuckets(), bh = h / buckets.count;
    ctx.clearRect(0, 0, w, h);
    for (var b = 0; b < buckets.count; b++) {
      ctx.fillStyle = PD.deviationColor(buckets.excess[b], this.scales.values);
      ctx.fillRect(0, b * bh, w - 8, Math.max(1, bh));
      if (buckets.culprit[b]) { ctx.fillStyle = '#c62828'; ctx.fillRect(w - 6, b * bh - 1, 6, Math.max(3, bh)); }
    }
    ctx.strokeStyle = '#1d2330';
    ctx.lineWidth = 1;
    ctx.strokeRect(0.5, first / n * h + 0.5, w - 9, Math.max(2, rowsInView / n * h - 1));
  };

  Heatmap.prototype.cellAt = function (e) {
    var r = this.canvas.getBoundingClientRect();
    var x = e.clientX - r.left, y = e.clientY - r.top + this.scroll.scrollTop;
    var pos = Math.floor(y / this.rowH), j = Math.floor(x / this.colW);
    if (pos < 0 || pos >= this.order.length || j < 0 || j >= this.functions.length) return null;
    return { row: this.order[pos], col: j };
  };

  Heatmap.prototype.hover = function (e) {
    var cell = this.cellAt(e);
    if (!cell) return PD.tooltip.hide();
    var fn = this.functions[cell.col], row = cell.row;
    var v = this.rowValues(row, 'values')[cell.col], s = this.rowValues(row, 'shares')[cell.col];
    var node = row.kind === 'node';
    PD.tooltip.show(e.clientX, e.clientY,
      (node ? 'node ' + row.name + ' · ' + row.members.length + ' ranks, the most deviating shown' : 'rank ' + row.rank + ' · ' + this.options.workerName(row.rank)) +
      '\n' + (fn.category || '') + ': ' + fn.name +
      '\ndeviation from the median worker: ' + PD.fmt.signedPct(v) + ' of step time' + (node && row.worst[cell.col] !== null ? ' (rank ' + row.worst[cell.col] + ')' : '') +
      '\n' + (node ? 'largest ' : '') + 'share of end-to-end time: ' + PD.fmt.pct(s) + (node ? '\nclick: ' + (row.expanded ? 'close' : 'its ranks') : ''));
  };

  Heatmap.prototype.setMode = function (mode) {
    this.mode = mode;
    this.updateButtons();
    this.render();
  };

  Heatmap.prototype.setOrder = function (order) {
    this.orderName = order;
    this.arrange();
    this.updateButtons();
    this.scroll.scrollTop = 0;
    this.render();
  };

  Heatmap.prototype.scrollToRank = function (rank) {
    var row = this.rankRows.find(function (r) { return r.rank === rank; }) ||
      (this.nodes.find(function (n) { return n.members.some(function (r) { return r.rank === rank; }); }) || { members: [] }).members.find(function (r) { return r.rank === rank; });
    if (!row) return;
    if (this.grouped && row.node && !row.node.expanded) { row.node.expanded = true; this.requestRows(row.node); this.arrange(); }
    this.scrollToIndex(this.order.indexOf(row));
  };
  Heatmap.prototype.scrollToIndex = function (pos) {
    this.scroll.scrollTop = Math.max(0, pos * this.rowH - this.viewH / 3);
    this.render();
  };

  Heatmap.prototype.updateButtons = function () {
    var self = this;
    Object.keys(this.modeButtons).forEach(function (k) { self.modeButtons[k].classList.toggle('active', k === self.mode); });
    Object.keys(this.orderButtons).forEach(function (k) { self.orderButtons[k].classList.toggle('active', k === (self.orderName || 'rank')); });
    if (this.groupButtons) Object.keys(this.groupButtons).forEach(function (k) { self.groupButtons[k].classList.toggle('active', (k === 'node') === self.grouped); });
    var ctx = setupCanvas(this.legendCanvas, 200, 10), scale = this.scales[this.mode];
    for (var x = 0; x < 200; x++) {
      ctx.fillStyle = this.mode === 'values' ? PD.deviationColor((x / 199) * 2 * scale - scale, scale) : PD.shareColor(x / 199 * scale, scale);
      ctx.fillRect(x, 0, 1, 10);
    }
    this.legendText.textContent = this.mode === 'values'
      ? PD.fmt.signedPct(-scale) + ' (faster)  …  ' + PD.fmt.signedPct(scale) + ' of step time (slower); communication beyond this is clipped'
      : '0  …  ' + PD.fmt.pct(scale) + ' of end-to-end time';
  };

  PD.Heatmap = Heatmap;

  /* Bar plot: one bar per rank, bucketed by max when there are more ranks than pixels. --- */

  /* Ticks for ranks first..last: every rank when they fit, else round steps (0, 512, ...). */
  function rankTicks(ranks, width) {
    var n = ranks.length, fit = Math.max(2, Math.floor(width / 44));
    if (n <= fit) return ranks.map(function (_, i) { return i; });
    var raw = n / fit, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag;
    [1, 2, 5, 10].some(function (m) { step = m * mag; return step >= raw; });
    var ticks = [];
    for (var i = 0; i < n; i += step) ticks.push(i);
    if (n - 1 - ticks[ticks.length - 1] > step / 2) ticks.push(n - 1);
    return ticks;
  }

  /* options: {ranks, values, highlight: Set, format(v), onClick(rank), label, floor,
   *           xTitle, yTitle, marks: Map rank -> label drawn above its bar,
   *           full: Set of ranks drawn at full height (a hang: no value, all the time),
   *           note: text across the plot (nothing stands out)} */
  PD.barPlot = function (options) {
    var canvas = PD.el('canvas', { className: 'plot', attrs: { role: 'img', 'aria-label': options.label || 'bar plot' } });
    var state = {}, marks = options.marks || new Map(), full = options.full || new Set();
    function draw() {
      var w = widthOf(canvas, 800), h = canvas.clientHeight || 180;
      var pad = { l: 58, r: 12, t: 24, b: options.xTitle ? 36 : 22 };
      var ctx = setupCanvas(canvas, w, h), n = options.ranks.length, pw = w - pad.l - pad.r, ph = h - pad.t - pad.b;
      var buckets = Math.max(1, Math.min(n, Math.floor(pw))), best = new Array(buckets).fill(-1);
      var important = function (i) { return options.highlight.has(options.ranks[i]) || full.has(options.ranks[i]); };
      /* Per pixel, the bar that matters: a highlighted rank, else the tallest. */
      options.values.forEach(function (v, i) {
        var b = Math.floor(i * buckets / n), cur = best[b];
        if (cur < 0) { best[b] = i; return; }
        var hi = important(i), hc = important(cur);
        if (hi !== hc ? hi : v > options.values[cur]) best[b] = i;
      });
      /* A floor on the axis keeps healthy noise looking like noise rather than tall bars. */
      var max = PD.maxOf(options.values, options.floor || 1e-12);
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillStyle = '#5d6678';
      ctx.strokeStyle = '#eef0f4';
      ctx.textAlign = 'right';
      [0, 0.5, 1].forEach(function (f) { /* y axis: 0, half, top, with grid lines */
        var y = pad.t + ph - f * ph;
        ctx.fillText(f ? options.format(max * f) : '0', pad.l - 6, y + 4);
        ctx.beginPath(); ctx.moveTo(pad.l, y + 0.5); ctx.lineTo(w - pad.r, y + 0.5); ctx.stroke();
      });
      if (options.yTitle) {
        ctx.save();
        ctx.translate(12, pad.t + ph / 2);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = 'center';
        ctx.fillText(options.yTitle, 0, 0);
        ctx.restore();
      }
      var bw = pw / buckets, slot = pw / n;
      ctx.textAlign = 'center';
      var ticks = rankTicks(options.ranks, pw);
      ticks.forEach(function (i) { /* x axis: the ranks */
        ctx.fillText(String(options.ranks[i]), pad.l + (i + 0.5) * slot, pad.t + ph + 14);
      });
      canvas.dataset.ticks = ticks.map(function (i) { return options.ranks[i]; }).join(',');
      if (options.xTitle) ctx.fillText(options.xTitle, pad.l + pw / 2, h - 6);
      var labelled = [];
      for (var b = 0; b < buckets; b++) {
        var i = best[b];
        if (i < 0) continue;
        var rank = options.ranks[i], v = options.values[i], hl = important(i);
        var bh = full.has(rank) ? ph : isFinite(v) ? v / max * ph : 0;
        ctx.fillStyle = hl ? '#c62828' : '#4c78a8';
        ctx.fillRect(pad.l + b * bw, pad.t + ph - bh, Math.max(1, bw - (bw > 3 ? 1 : 0)), Math.max(hl ? 2 : 0, bh));
        if (marks.has(rank)) labelled.push({ x: pad.l + (b + 0.5) * bw, y: pad.t + ph - bh, text: marks.get(rank) });
      }
      ctx.strokeStyle = '#dde1e8';
      ctx.beginPath(); ctx.moveTo(pad.l, pad.t + ph + 0.5); ctx.lineTo(w - pad.r, pad.t + ph + 0.5); ctx.stroke();
      ctx.fillStyle = '#c62828';
      ctx.font = '600 11px system-ui, sans-serif';
      labelled.slice(0, 12).forEach(function (m) {
        ctx.textAlign = m.x < pad.l + 40 ? 'left' : m.x > w - pad.r - 40 ? 'right' : 'center';
        ctx.fillText(m.text, m.x, Math.max(11, m.y - 4));
      });
      if (options.note) {
        ctx.fillStyle = '#5d6678';
        ctx.font = '13px system-ui, sans-serif';
        ctx.textAlign = 'center';
        ctx.fillText(options.note, pad.l + pw / 2, pad.t + ph / 2);
      }
      state = { pad: pad, bw: bw, best: best };
      canvas.dataset.marks = labelled.map(function (m) { return m.text; }).join(',');
    }
    function indexAt(e) {
      var r = canvas.getBoundingClientRect(), b = Math.floor((e.clientX - r.left - state.pad.l) / state.bw);
      return b >= 0 && b < state.best.length ? state.best[b] : -1;
    }
    canvas.addEventListener('mousemove', function (e) {
      var i = indexAt(e);
      if (i < 0) return PD.tooltip.hide();
      var rank = options.ranks[i];
      PD.tooltip.show(e.clientX, e.clientY, 'rank ' + rank + ': ' + (full.has(rank) ? (marks.get(rank) || '') : options.format(options.values[i])));
    });
    canvas.addEventListener('mouseleave', function () { PD.tooltip.hide(); });
    canvas.addEventListener('click', function (e) { var i = indexAt(e); if (i >= 0 && options.onClick) options.onClick(options.ranks[i]); });
    return { node: canvas, mount: function () { draw(); redrawOnResize(canvas, draw); } };
  };

  /* A plot's width: its box's (CSS width 100%), not the pixels it was last drawn at. */
  function widthOf(canvas, fallback) {
    canvas.style.width = '';
    return canvas.clientWidth || fallback;
  }
  /* Drawn again when its box changes width (a window made narrower): watched, not a window
   * listener, so a plot no longer in the page costs nothing. */
  function redrawOnResize(canvas, draw) {
    var box = canvas.parentElement, last = box ? box.clientWidth : 0;
    if (!box || typeof ResizeObserver !== 'function') return;
    new ResizeObserver(function () {
      if (box.clientWidth !== last) { last = box.clientWidth; draw(); }
    }).observe(box);
  }

  /* Line plot, for hardware samples when the chart library is not bundled. ---------- */

  /* options: {series: [{name, points: [[t, v]]}], unit} */
  PD.linePlot = function (options) {
    var canvas = PD.el('canvas', { className: 'plot', style: { height: '260px' }, attrs: { role: 'img', 'aria-label': 'line plot' } });
    var palette = ['#4c78a8', '#f58518', '#54a24b', '#e45756', '#72b7b2', '#b279a2', '#ff9da6', '#9d755d', '#bab0ac', '#eeca3b'];
    function draw() {
      var w = widthOf(canvas, 800), h = canvas.clientHeight || 260, pad = { l: 54, r: 10, t: 10, b: 22 };
      var ctx = setupCanvas(canvas, w, h), t0 = Infinity, t1 = -Infinity, v1 = 0;
      options.series.forEach(function (s) {
        s.points.forEach(function (p) { t0 = Math.min(t0, p[0]); t1 = Math.max(t1, p[0]); v1 = Math.max(v1, p[1]); });
      });
      if (!isFinite(t0) || t1 <= t0) return;
      var pw = w - pad.l - pad.r, ph = h - pad.t - pad.b;
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillStyle = '#5d6678';
      ctx.textAlign = 'right';
      ctx.fillText(PD.fmt.num(v1) + ' ' + (options.unit || ''), pad.l - 4, pad.t + 8);
      ctx.fillText(PD.fmt.num(t1 - t0) + ' ms', w - pad.r, h - 6);
      options.series.forEach(function (s, k) {
        ctx.strokeStyle = s.color || palette[k % palette.length];
        ctx.lineWidth = 1.2;
        ctx.beginPath();
        s.points.forEach(function (p, i) {
          var x = pad.l + (p[0] - t0) / (t1 - t0) * pw, y = pad.t + ph - (v1 > 0 ? p[1] / v1 * ph : 0);
          if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        });
        ctx.stroke();
      });
    }
    return { node: canvas, mount: function () { draw(); redrawOnResize(canvas, draw); } };
  };
})();
