/* table.js -- sortable, filterable tables that stay fast with 4096 workers.
 *
 * Design: rows have one fixed height, so the rows in view follow from scrollTop alone; the
 * table body holds a spacer row above, the ~30 visible rows, and a spacer below, and is
 * rebuilt (once per animation frame) on scroll. A 4096-row table therefore costs the same
 * DOM as a 30-row one; sorting and filtering are array operations on the data. Columns are
 * fixed-width (table-layout: fixed) so they do not jump while scrolling. No text is cut
 * off at any width (fitColumns): a column with a width grows to what its header and drawn
 * cells need; a name column (no width) takes the room left and shortens its names in the
 * middle, whole on hover; a table then wider than its room scrolls sideways inside a box
 * that ends at its last whole column, the tools naming the columns further right.
 * Headers wrap at spaces (the header row is measured, not assumed, for the row math).
 *
 *   new PD.Table({columns: [{label, value(row), text(row)?, render(row)?, title(row)?,
 *                            numeric?, width?, whole?, sortable?, className?, search?}],
 *                 rows, sort: {column, descending}, height, filter: 'placeholder',
 *                 onRowClick(row), rowClass(row)})  -> .node, .scroll, .highlight(pred), .rows,
 *                                                     .fitColumns(reset)
 */
'use strict';
var PD = (window.PD = window.PD || {});

(function () {
  var ROW_HEIGHT = 26, HEADER_HEIGHT = 31, OVERSCAN = 8;

  /* A column's classes: 'num' for numbers, and its own (sticky-col: stays in place when
   * the table scrolls sideways; wrap: a header on two lines; finding-col: marked). */
  function cellClass(col) {
    return [col.numeric ? 'num' : '', col.className || ''].join(' ').trim();
  }

  function Table(options) {
    this.options = options;
    this.columns = options.columns;
    this.allRows = options.rows.slice();
    this.rows = this.allRows;
    this.sort = options.sort || null;
    this.highlighted = null;
    this.scheduled = false;
    this.build();
    if (this.sort) this.applySort();
    this.render();
  }

  Table.prototype.build = function () {
    var self = this, o = this.options, el = PD.el;
    this.headers = this.columns.map(function (col, i) {
      return el('th', {
        className: cellClass(col), title: col.help || col.label,
        style: col.width ? { width: col.width } : null,
        attrs: { scope: 'col' },
        onclick: function () { if (col.sortable !== false) self.sortBy(i); }
      }, col.label);
    });
    this.tbody = el('tbody');
    this.table = el('table', null, el('thead', null, el('tr', null, this.headers)), this.tbody);
    var visibleRows = Math.min(this.allRows.length, o.visibleRows || 18);
    this.scroll = el('div', {
      className: 'scroll',
      style: { 'max-height': (HEADER_HEIGHT + Math.max(1, visibleRows) * ROW_HEIGHT + 2) + 'px' }
    }, this.table);
    this.scroll.addEventListener('scroll', function () { self.schedule(); self.showHidden(); }, { passive: true });
    this.count = el('span');
    this.hidden = el('span', { className: 'more-columns' });
    var tools = el('div', { className: 'tools' });
    if (o.filter) {
      var input = el('input', { type: 'search', placeholder: o.filter, attrs: { 'aria-label': o.filter, size: String(Math.min(60, o.filter.length + 2)) } });
      input.addEventListener('input', function () { self.filter(input.value); });
      tools.appendChild(input);
    }
    tools.appendChild(this.count);
    tools.appendChild(this.hidden);
    this.node = el('div', { className: 'vtable' }, tools, this.scroll);
    /* Sizes are known once the table is in the document, and change with the window. The
     * table's own box is watched, not the scroll box fitColumns narrows. */
    if (typeof ResizeObserver === 'function') new ResizeObserver(function () { self.fitColumns(true); }).observe(this.node);
    this.node.ptTable = this; /* for tests and the console: the data behind the view */
  };

  Table.prototype.schedule = function () {
    var self = this;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(function () { self.scheduled = false; self.render(); });
  };

  Table.prototype.cellText = function (col, row) {
    if (col.text) return col.text(row);
    var v = col.value(row);
    return v === undefined || v === null ? '' : v;
  };

  /* The header row's height: one line is HEADER_HEIGHT, a wrapped header more. */
  Table.prototype.headerHeight = function () {
    var thead = this.table.tHead;
    return Math.max(HEADER_HEIGHT, thead && thead.offsetHeight ? thead.offsetHeight : 0);
  };

  /* Columns fit what they show. Numbers, and columns marked whole (a host, a command),
   * are never shortened: their column widens to its header's longest word and its drawn
   * cells. Names (the other text: kernels, stacks, workers) are shortened in the middle to
   * their column, whole on hover; a name column without a width of its own takes the room
   * left, NAME_MIN px at least. So the numbers stay in view and nothing is cut by its box.
   * Widening one column can narrow the others, so it goes round again, a few times at
   * most. Called after each draw (grow only, so columns do not jump while scrolling) and,
   * with reset, when the table's box changes size (name columns take their room again). */
  var NAME_MIN = 180;
  function isName(col) { return !col.numeric && !col.whole; }
  Table.prototype.fitColumns = function (reset) {
    if (!this.scroll.isConnected || !this.scroll.clientWidth) return;
    var columns = this.columns, headers = this.headers, rows = this.tbody.querySelectorAll('tr.data');
    if (reset) headers.forEach(function (th, i) { if (!columns[i].width) th.style.width = ''; });
    for (var round = 0; round < 4; round++) {
      /* Strictly: a cell a fraction of a pixel too narrow already shows its ellipsis. */
      var need = headers.map(function (th, i) {
        var least = isName(columns[i]) && !columns[i].width && th.offsetWidth < NAME_MIN ? NAME_MIN : 0;
        return Math.max(least, th.scrollWidth > th.clientWidth ? th.scrollWidth : 0);
      });
      for (var r = 0; r < rows.length; r++) {
        var cells = rows[r].children;
        for (var i = 0; i < cells.length && i < need.length; i++) {
          if (isName(columns[i]) && need[i]) continue; /* shortened once its column is set */
          if (isName(columns[i]) && shortenToFit(cells[i])) continue;
          if (cells[i].scrollWidth > cells[i].clientWidth) need[i] = Math.max(need[i], cells[i].scrollWidth);
        }
      }
      var grew = false;
      need.forEach(function (w, i) {
        if (w > 0 && w > headers[i].offsetWidth) { headers[i].style.width = Math.ceil(w + 2) + 'px'; grew = true; }
      });
      if (!grew) break;
    }
    var height = this.headerHeight(), visible = Math.max(1, Math.min(this.allRows.length, this.options.visibleRows || 18));
    this.scroll.style.maxHeight = (height + visible * ROW_HEIGHT + 2) + 'px';
    this.snapWidth();
    this.showHidden();
  };

  /* A table wider than its room scrolls sideways; its box then ends at the last column
   * that fits whole, so no column shows cut at the edge (a column half in view reads as
   * clipped), and the tools say which columns are further right. */
  Table.prototype.snapWidth = function () {
    var room = this.node.clientWidth - 2, edge = 0; /* less the box's borders */
    if (this.table.offsetWidth > room) {
      var start = this.table.getBoundingClientRect().left;
      this.headers.forEach(function (th) {
        var right = th.getBoundingClientRect().right - start;
        if (right <= room && right > edge) edge = right;
      });
    }
    var width = edge >= room / 2 ? Math.floor(edge) + 2 + 'px' : '';
    if (this.scroll.style.maxWidth !== width) this.scroll.style.maxWidth = width;
  };

  /* The columns out of view, named in the tools: those right of the box, or how many are
   * left of it once scrolled (the fixed rank column aside). */
  Table.prototype.showHidden = function () {
    var box = this.scroll.getBoundingClientRect(), right = box.left + this.scroll.clientWidth + 1, text = '';
    var out = this.headers.filter(function (th) { return th.getBoundingClientRect().right > right; });
    var left = this.headers.filter(function (th) { return th.getBoundingClientRect().left < box.left - 1 && !th.classList.contains('sticky-col'); });
    if (out.length) text = 'scroll sideways for ' + out.map(function (th) { return th.textContent; }).join(', ') + ' →';
    else if (left.length) text = '← ' + left.length + (left.length === 1 ? ' more column' : ' more columns') + ' left';
    if (this.hidden.textContent !== text) this.hidden.textContent = text;
  };

  /* A name cell (its text alone, or one element holding text alone) shortened in the
   * middle to its column, the whole name kept for hover and for widening later; false for
   * a cell of another shape (a command with a link in it), which the column widens for. */
  function shortenToFit(td) {
    var target = td.children.length === 0 ? td
      : td.childNodes.length === 1 && td.firstElementChild && td.firstElementChild.children.length === 0 ? td.firstElementChild : null;
    if (!target) return false;
    var full = target.dataset.full || target.textContent;
    if (!target.dataset.full && td.scrollWidth <= td.clientWidth) return true; /* fits whole */
    var cs = getComputedStyle(td), font = getComputedStyle(target);
    var room = td.clientWidth - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0) - 2;
    var text = PD.fitText(full, room, font.fontStyle + ' ' + font.fontWeight + ' ' + font.fontSize + ' ' + font.fontFamily);
    if (text !== full) {
      target.dataset.full = full;
      if (!target.title && !td.title) target.title = full;
    }
    if (target.textContent !== text) target.textContent = text;
    return td.scrollWidth <= td.clientWidth;
  }

  Table.prototype.render = function () {
    var el = PD.el, n = this.rows.length;
    var viewport = this.scroll.clientHeight || (this.options.visibleRows || 18) * ROW_HEIGHT;
    var top = Math.max(0, this.scroll.scrollTop - this.headerHeight());
    var first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    var last = Math.min(n, Math.ceil((top + viewport) / ROW_HEIGHT) + OVERSCAN);
    var key = first + ':' + last + ':' + n + ':' + this.version;
    if (key === this.drawn) return; /* a scroll within the rows already built */
    this.drawn = key;
    var frag = document.createDocumentFragment(), span = this.columns.length;
    frag.appendChild(el('tr', { className: 'spacer' }, el('td', { colSpan: span, style: { height: first * ROW_HEIGHT + 'px' } })));
    for (var i = first; i < last; i++) frag.appendChild(this.renderRow(this.rows[i]));
    frag.appendChild(el('tr', { className: 'spacer' }, el('td', { colSpan: span, style: { height: (n - last) * ROW_HEIGHT + 'px' } })));
    if (n === 0) frag.appendChild(el('tr', null, el('td', { colSpan: span, className: 'muted' }, this.options.empty || 'Nothing to show.')));
    this.tbody.replaceChildren(frag);
    this.fitColumns();
    this.count.textContent = n === this.allRows.length ? n + (n === 1 ? ' row' : ' rows')
                                                        : n + ' of ' + this.allRows.length + ' rows';
  };

  Table.prototype.renderRow = function (row) {
    var el = PD.el, o = this.options, self = this;
    var classes = ['data'];
    if (o.onRowClick) classes.push('clickable');
    if (o.rowClass) { var c = o.rowClass(row); if (c) classes.push(c); }
    if (this.highlighted && this.highlighted(row)) classes.push('hl');
    var tr = el('tr', { className: classes.join(' ') });
    this.columns.forEach(function (col) {
      var content = col.render ? col.render(row) : self.cellText(col, row);
      var title = col.title ? col.title(row) : (col.render ? null : String(content));
      tr.appendChild(el('td', { className: cellClass(col), title: title }, content));
    });
    if (o.onRowClick) tr.addEventListener('click', function () { o.onRowClick(row); });
    return tr;
  };

  /* Rows, order or highlight changed: the next render rebuilds even if the window did not move. */
  Table.prototype.invalidate = function () { this.version = (this.version || 0) + 1; };

  Table.prototype.sortBy = function (index) {
    var same = this.sort && this.sort.column === index;
    var numeric = this.columns[index].numeric;
    this.sort = { column: index, descending: same ? !this.sort.descending : !!numeric };
    this.applySort();
    this.invalidate();
    this.render();
  };

  Table.prototype.applySort = function () {
    var col = this.columns[this.sort.column], dir = this.sort.descending ? -1 : 1;
    var keyed = this.rows.map(function (row, i) { return { row: row, key: col.value(row), i: i }; });
    keyed.sort(function (a, b) {
      var x = a.key, y = b.key, missingX = x === undefined || x === null || x !== x, missingY = y === undefined || y === null || y !== y;
      if (missingX !== missingY) return missingX ? 1 : -1; /* blanks last either way */
      var c = missingX ? 0 : typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), 'en', { numeric: true });
      return c * dir || a.i - b.i;
    });
    this.rows = keyed.map(function (k) { return k.row; });
    var self = this;
    this.headers.forEach(function (th, i) {
      if (i === self.sort.column) th.setAttribute('aria-sort', self.sort.descending ? 'descending' : 'ascending');
      else th.removeAttribute('aria-sort');
    });
  };

  Table.prototype.filter = function (query) {
    var q = query.trim().toLowerCase(), self = this;
    /* The columns marked search: true, else all: 100,000 workers x 17 formatted cells
     * would take a second a keystroke. */
    var searched = this.columns.filter(function (col) { return col.search; });
    if (!searched.length) searched = this.columns;
    this.rows = !q ? this.allRows.slice() : this.allRows.filter(function (row) {
      return searched.some(function (col) { return String(self.cellText(col, row)).toLowerCase().indexOf(q) >= 0; });
    });
    if (this.sort) this.applySort();
    this.scroll.scrollTop = 0;
    this.invalidate();
    this.render();
  };

  /* Marks the rows matching pred and scrolls the first into view. Returns how many match. */
  Table.prototype.highlight = function (pred) {
    this.highlighted = pred;
    this.invalidate();
    var index = this.rows.findIndex(pred), count = this.rows.filter(pred).length;
    if (index >= 0) {
      var self = this;
      requestAnimationFrame(function () {
        self.scroll.scrollTop = Math.max(0, index * ROW_HEIGHT - ROW_HEIGHT * 2);
        self.invalidate();
        self.render();
      });
    }
    this.render();
    return count;
  };

  PD.Table = Table;
})();
