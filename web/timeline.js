/* timeline.js -- the step timeline: per rank, each profiled step as the stretches it
 * worked and waited, up to each sync point, and the rank that sets each step marked.
 *
 * The data are the report's (docs/report-schema.md): a worker's steps[] carry their sync
 * points ([end ms from the step's start, work before it since the previous]) and the work
 * after the last; diagnosis.step_model.pace names, per modelled step, the rank that is the
 * busiest in most of its segments, the one the others wait for. A worker's work between
 * two sync points is drawn as one busy stretch, then its wait up to the sync point: the
 * same picture the step model computes with (whatif.c). A summary without sync points
 * gives one busy stretch per step (its exposed work) and the rest as waiting.
 *
 * Design: like the heatmap (plots.js), one canvas the size of the viewport draws only the
 * rows in view, HTML labels beside it, a spacer for the scroll bar, so 4096 ranks cost
 * what a screenful does. Steps sit side by side, each as wide as its longest rank's step,
 * every rank's step starting at its own start (windows are not on one clock to the
 * millisecond, but a step's sync points are). At most MAX_STEPS steps are drawn.
 */
'use strict';
var PD = (window.PD = window.PD || {});

(function () {
  var MAX_STEPS = 8, MIN_ROW_H = 18, MAX_ROW_H = 40, SMALL_JOB_H = 300, STEP_GAP = 14, GUTTER_MIN = 110;
  var BUSY = '#4c78a8', WAIT = '#f6c48e', AFTER = '#e4e7ec', TICK = '#1d2330', PACER = '#c62828', NOISE = '#8a93a3';

  /* A step's setter holds the others up only when it leads by more than the noise. */
  function holdsUp(p) { return !!p && p.above_noise !== false; }

  /* A rank's step as stretches: [{from, to, busy}] in ms from the step's start, and the
   * sync points' ends. */
  PD.stepStretches = function (step) {
    var ms = typeof step.ms === 'number' ? step.ms : 0, out = [], ends = [], t = 0;
    function add(from, to, busy) { if (to > from) out.push({ from: from, to: to, busy: busy }); }
    if (Array.isArray(step.syncs)) {
      step.syncs.forEach(function (p) {
        var end = Math.min(ms, Math.max(t, Number(p[0]) || 0)), work = Math.max(0, Number(p[1]) || 0);
        add(t, Math.min(end, t + work), true);
        add(Math.min(end, t + work), end, false);
        ends.push(end);
        t = end;
      });
      var tail = Math.max(0, Number(step.tail_busy_ms) || 0);
      add(t, Math.min(ms, t + tail), true);
      add(Math.min(ms, t + tail), ms, false);
    } else {
      var waiting = (step.communication_ms || 0) + (step.idle_ms || 0);
      add(0, Math.max(0, ms - waiting), true);
      add(Math.max(0, ms - waiting), ms, false);
    }
    return { stretches: out, syncs: ends, ms: ms, synced: Array.isArray(step.syncs) };
  };

  /* options: {workers: [{rank, name, steps}], pace: [{step, rank, sets, of, lead_ms}],
   *           culprits: Set, onRowClick(rank)} */
  function Timeline(options) {
    var self = this;
    this.options = options;
    this.rows = options.workers.filter(function (w) { return Array.isArray(w.steps) && w.steps.length; });
    this.stepCount = Math.min(MAX_STEPS, PD.maxOf(this.rows.map(function (w) { return w.steps.length; }), 0));
    this.totalSteps = PD.maxOf(this.rows.map(function (w) { return w.steps.length; }), 0);
    this.pace = [];
    (options.pace || []).forEach(function (p) { if (p && p.step >= 0 && p.step < self.stepCount) self.pace[p.step] = p; });
    this.stepMs = [];
    for (var s = 0; s < this.stepCount; s++)
      this.stepMs.push(PD.maxOf(this.rows.map(function (w) { return (w.steps[s] || {}).ms || 0; }), 1e-3));
    this.paced = new Map(); /* rank -> steps it sets */
    this.pace.forEach(function (p) { if (holdsUp(p)) self.paced.set(p.rank, (self.paced.get(p.rank) || 0) + 1); });
    this.rowH = Math.max(MIN_ROW_H, Math.min(MAX_ROW_H, Math.floor(SMALL_JOB_H / Math.max(1, this.rows.length))));
    this.order = this.rows.map(function (_, i) { return i; });
    this.orderName = 'rank';
    this.build();
  }

  Timeline.prototype.build = function () {
    var el = PD.el, self = this;
    this.orderButtons = {
      rank: el('button', { onclick: function () { self.setOrder('rank'); } }, 'By rank'),
      pace: el('button', { onclick: function () { self.setOrder('pace'); } }, 'Step setters first')
    };
    var toolbar = el('div', { className: 'legend timeline-legend' },
      el('span', null, 'Rows:'), this.orderButtons.rank, this.orderButtons.pace,
      el('span', null, el('i', { style: { background: BUSY } }), 'busy (its own work)'),
      el('span', null, el('i', { style: { background: WAIT } }), 'waiting (in a collective, or idle)'),
      el('span', null, el('i', { className: 'tick' }), 'sync point'),
      el('span', null, el('i', { className: 'pacer' }), 'sets the step time'));
    this.head = el('div', { className: 'tl-head' });
    this.canvas = el('canvas', { attrs: { 'aria-label': 'step timeline', role: 'img' } });
    this.labels = el('div', { className: 'labels' });
    this.spacer = el('div', { style: { height: this.rows.length * this.rowH + 'px' } });
    this.scroll = el('div', { className: 'scroll' }, el('div', { className: 'sticky' }, this.canvas, this.labels), this.spacer);
    this.gutter = this.measureGutter();
    this.node = el('div', { id: 'timeline', className: 'timeline', style: { '--gutter': this.gutter + 'px' } },
      toolbar, this.setters(), this.head, this.scroll);
    this.node.dataset.pacers = this.pace.map(function (p) { return holdsUp(p) ? p.rank : ''; }).join(',');
    this.node.ptTimeline = this;
    this.scroll.addEventListener('scroll', function () { self.schedule(); }, { passive: true });
    this.canvas.addEventListener('mousemove', function (e) { self.hover(e); });
    this.canvas.addEventListener('mouseleave', function () { PD.tooltip.hide(); });
    this.canvas.addEventListener('click', function (e) {
      var at = self.at(e);
      if (at && self.options.onRowClick) self.options.onRowClick(self.rows[at.row].rank);
    });
    this.resizeListener = function () { self.layout(); };
    window.addEventListener('resize', this.resizeListener);
    this.updateButtons();
  };

  /* One line per step: who sets it, in how many of its segments, and by how much. */
  Timeline.prototype.setters = function () {
    var el = PD.el, self = this, items = [];
    for (var s = 0; s < this.stepCount; s++) {
      var p = this.pace[s], step = this.stepLabel(s);
      if (!p) continue;
      if (!holdsUp(p)) {
        items.push(el('li', { dataset: { step: s, rank: p.rank, noise: 'true' } }, step + ': no rank holds it up (rank ' + p.rank +
          ' is the busiest, by ' + PD.fmt.ms(p.lead_ms) + ', within the noise).'));
        continue;
      }
      items.push(el('li', { dataset: { step: s, rank: p.rank } }, step + ': ',
        el('b', { className: 'status-slow' }, 'rank ' + p.rank), ' sets the step time',
        p.of > 1 ? ' (the busiest in ' + p.sets + ' of its ' + p.of + ' stretches between sync points' : ' (the busiest',
        self.rows.length > 1 && p.lead_ms > 0 ? ', ' + PD.fmt.ms(p.lead_ms) + ' ahead of the next)' : ')'));
    }
    if (this.totalSteps > this.stepCount) items.push(el('li', { className: 'muted' }, 'The first ' + this.stepCount + ' of ' + this.totalSteps + ' profiled steps are drawn.'));
    if (items.length) return el('ul', { className: 'plain setters', id: 'step-setters' }, items);
    return el('p', { className: 'muted', id: 'step-setters' }, this.totalSteps < 2
      ? 'No rank is marked as setting the step time: the step model compares steps one by one only when every worker profiled two or more, and these profiled one.'
      : 'The report does not say which rank sets each step (a report from an older perftracker, or workers whose steps could not be compared one by one).');
  };

  Timeline.prototype.stepLabel = function (s) {
    var first = this.rows.find(function (w) { return w.steps[s]; });
    return 'step ' + (first && first.steps[s].step !== undefined ? first.steps[s].step : s + 1);
  };

  Timeline.prototype.rowLabel = function (w) {
    var sets = this.paced.get(w.rank);
    return (sets ? '▶ ' : '') + 'rank ' + w.rank + (w.status === 'hang' ? ' (hang)' : '');
  };

  Timeline.prototype.measureGutter = function () {
    var self = this, ctx = document.createElement('canvas').getContext('2d'), widest = 0;
    ctx.font = '600 11px ui-monospace, Menlo, Consolas, monospace';
    /* One label of each length: the font is monospaced, and measuring 100,000 labels
     * would cost half a second. */
    var oneOfEachLength = new Map();
    this.rows.forEach(function (w) { var label = self.rowLabel(w); if (!oneOfEachLength.has(label.length)) oneOfEachLength.set(label.length, label); });
    oneOfEachLength.forEach(function (label) { widest = Math.max(widest, ctx.measureText(label).width); });
    return Math.max(GUTTER_MIN, Math.ceil(widest) + 16);
  };

  Timeline.prototype.mount = function () { this.layout(); };
  Timeline.prototype.destroy = function () { window.removeEventListener('resize', this.resizeListener); };

  /* Widths: every step as wide as its longest rank's, side by side, in the room there is. */
  Timeline.prototype.layout = function () {
    var el = PD.el, self = this;
    var width = Math.max(300, (this.node.clientWidth || 900) - this.gutter - 4);
    var total = this.stepMs.reduce(function (a, b) { return a + b; }, 0), gaps = STEP_GAP * Math.max(0, this.stepCount - 1);
    this.pxPerMs = Math.max(1e-6, (width - gaps) / total);
    this.stepX = [];
    var x = 0;
    for (var s = 0; s < this.stepCount; s++) { this.stepX.push(x); x += this.stepMs[s] * this.pxPerMs + STEP_GAP; }
    this.width = Math.ceil(x - STEP_GAP);
    this.viewH = Math.min(this.rows.length * this.rowH, Math.max(240, window.innerHeight - 360));
    this.scroll.style.height = this.viewH + 'px';
    this.ctx = PD.setupCanvas(this.canvas, this.width, this.viewH);
    this.head.replaceChildren.apply(this.head, this.stepMs.map(function (ms, s) {
      return el('div', { className: 'tl-step', style: { left: self.stepX[s] + 'px', width: ms * self.pxPerMs + 'px' }, dataset: { step: s } },
        el('span', { className: 'tl-name' }, self.stepLabel(s)), el('span', { className: 'tl-scale' }, '0 … ' + PD.fmt.ms(ms)));
    }));
    this.render();
  };

  Timeline.prototype.schedule = function () {
    var self = this;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(function () { self.scheduled = false; self.render(); });
  };

  Timeline.prototype.render = function () {
    if (!this.ctx) return;
    var ctx = this.ctx, el = PD.el, self = this, rowH = this.rowH, barH = Math.max(8, rowH - 6);
    var top = this.scroll.scrollTop, first = Math.floor(top / rowH), offset = top - first * rowH;
    var inView = Math.ceil(this.viewH / rowH) + 1, labels = document.createDocumentFragment();
    ctx.clearRect(0, 0, this.width, this.viewH);
    for (var k = 0; k < inView && first + k < this.order.length; k++) {
      var w = this.rows[this.order[first + k]], y = k * rowH - offset, by = y + (rowH - barH) / 2;
      for (var s = 0; s < this.stepCount; s++) {
        var step = w.steps[s];
        if (!step) continue;
        var x0 = this.stepX[s], d = PD.stepStretches(step), px = this.pxPerMs;
        ctx.fillStyle = AFTER;
        ctx.fillRect(x0, by, this.stepMs[s] * px, barH);
        d.stretches.forEach(function (r) {
          ctx.fillStyle = r.busy ? BUSY : WAIT;
          ctx.fillRect(x0 + r.from * px, by, Math.max(0.5, (r.to - r.from) * px), barH);
        });
        ctx.fillStyle = TICK;
        d.syncs.forEach(function (t) { ctx.fillRect(Math.min(x0 + t * px, x0 + d.ms * px - 1), by - 2, 1.5, barH + 4); });
        var p = this.pace[s];
        if (p && p.rank === w.rank) { /* the setter: red; one within the noise: a grey dashed line */
          ctx.strokeStyle = holdsUp(p) ? PACER : NOISE;
          ctx.lineWidth = holdsUp(p) ? 2 : 1;
          ctx.setLineDash(holdsUp(p) ? [] : [4, 3]);
          ctx.strokeRect(x0 + 1, y + 1, d.ms * px - 2, rowH - 2);
          ctx.setLineDash([]);
        }
      }
      var sets = this.paced.get(w.rank);
      labels.appendChild(el('div', {
        className: 'rowlabel' + (sets ? ' pacer' : '') + (this.options.culprits.has(w.rank) ? ' culprit' : ''),
        title: 'rank ' + w.rank + ' · ' + (w.name || '') + (sets ? ' · sets the step time in ' + sets + ' of ' + this.stepCount + ' steps' : ''),
        style: { top: y + 'px', height: rowH + 'px', 'line-height': rowH + 'px' }, dataset: { rank: w.rank },
        onclick: (function (r) { return function () { if (self.options.onRowClick) self.options.onRowClick(r); }; })(w.rank)
      }, this.rowLabel(w)));
    }
    this.labels.replaceChildren(labels);
    this.canvas.dataset.firstRow = String(first);
  };

  /* The row and step under the pointer, and the time in that step. */
  Timeline.prototype.at = function (e) {
    var r = this.canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top + this.scroll.scrollTop;
    var pos = Math.floor(y / this.rowH);
    if (pos < 0 || pos >= this.order.length) return null;
    for (var s = 0; s < this.stepCount; s++) {
      var t = (x - this.stepX[s]) / this.pxPerMs;
      if (t >= 0 && t <= this.stepMs[s]) return { row: this.order[pos], step: s, t: t };
    }
    return { row: this.order[pos], step: -1, t: 0 };
  };

  Timeline.prototype.hover = function (e) {
    var at = this.at(e), fmt = PD.fmt;
    if (!at || at.step < 0) return PD.tooltip.hide();
    var w = this.rows[at.row], step = w.steps[at.step];
    if (!step) return PD.tooltip.hide();
    var d = PD.stepStretches(step), busy = 0, p = this.pace[at.step];
    d.stretches.forEach(function (r) { if (r.busy) busy += r.to - r.from; });
    var lines = ['rank ' + w.rank + ' · ' + this.stepLabel(at.step) + ': ' + fmt.ms(d.ms),
                 'busy ' + fmt.ms(busy) + ', waiting ' + fmt.ms(d.ms - busy),
                 d.synced ? d.syncs.length + ' sync point' + (d.syncs.length === 1 ? '' : 's') + (d.syncs.length ? ' at ' + d.syncs.map(fmt.ms).join(', ') : '')
                          : 'sync points not recorded: its exposed work, then the rest'];
    if (p && p.rank === w.rank) lines.push(holdsUp(p) ? 'sets the step time' + (this.rows.length > 1 && p.lead_ms > 0 ? ': ' + fmt.ms(p.lead_ms) + ' ahead of the next busiest' : '')
                                                      : 'the busiest, by ' + fmt.ms(p.lead_ms) + ': within the noise');
    PD.tooltip.show(e.clientX, e.clientY, lines.join('\n'));
  };

  Timeline.prototype.setOrder = function (order) {
    var rows = this.rows, paced = this.paced;
    this.orderName = order;
    this.order = rows.map(function (_, i) { return i; });
    if (order === 'pace') this.order.sort(function (a, b) { return (paced.get(rows[b].rank) || 0) - (paced.get(rows[a].rank) || 0) || a - b; });
    this.updateButtons();
    this.scroll.scrollTop = 0;
    this.render();
  };

  Timeline.prototype.updateButtons = function () {
    var self = this;
    Object.keys(this.orderButtons).forEach(function (k) { self.orderButtons[k].classList.toggle('active', k === self.orderName); });
  };

  Timeline.prototype.scrollToRank = function (rank) {
    var i = this.rows.findIndex(function (w) { return w.rank === rank; }), pos = this.order.indexOf(i);
    if (pos >= 0) { this.scroll.scrollTop = Math.max(0, pos * this.rowH - this.viewH / 3); this.render(); }
  };

  PD.Timeline = Timeline;
})();
