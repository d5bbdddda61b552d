/* dom.js -- the only way PerfDisplay puts report data on the page, and how it names things.
 *
 * Every string in a report comes from a trace: kernel names hold '<', '>' and '&', Python
 * names can hold anything, and a trace can be hostile. So the page never assigns report
 * data to innerHTML or builds markup from it: el() creates elements and inserts strings as
 * text nodes, titles and data attributes as properties, and links only to relative paths
 * (safeHref). The one place HTML is unavoidable, the chart library's tooltips, goes
 * through escapeHtml(). Plain scripts, no modules: module scripts do not load from file://.
 */
'use strict';
var PD = (window.PD = window.PD || {});

(function () {
  var SAFE_PROPS = { className: 1, title: 1, id: 1, tabIndex: 1, type: 1, value: 1, colSpan: 1,
                     htmlFor: 1, placeholder: 1, checked: 1, selected: 1, hidden: 1, disabled: 1 };

  /* el('div', {className: 'x', title: fullName, onclick: fn, dataset: {rank: 5},
   *            style: {width: '10px'}, attrs: {role: 'button'}}, child, [children], 'text') */
  PD.el = function (tag, props) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (key) {
        var value = props[key];
        if (value === undefined || value === null) return;
        if (key === 'text') node.textContent = String(value);
        else if (key === 'href') node.setAttribute('href', PD.safeHref(value));
        else if (key === 'dataset') Object.keys(value).forEach(function (k) { node.dataset[k] = String(value[k]); });
        else if (key === 'style') Object.keys(value).forEach(function (k) { node.style.setProperty(k, value[k]); });
        else if (key === 'attrs') Object.keys(value).forEach(function (k) {
          if (/^on/i.test(k) || k === 'style' || k === 'href' || k === 'src') throw new Error('unsafe attribute ' + k);
          node.setAttribute(k, String(value[k]));
        });
        else if (/^on[a-z]+$/.test(key) && typeof value === 'function') node.addEventListener(key.slice(2), value);
        else if (SAFE_PROPS[key]) node[key] = value;
        else throw new Error('PD.el: unsupported property ' + key);
      });
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  };

  function append(node, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) child.forEach(function (c) { append(node, c); });
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }

  /* Links stay inside the page or the folder: '#/...' routes and relative paths only. */
  PD.safeHref = function (href) {
    href = String(href);
    if (href.charAt(0) === '#') return href;
    var up = href.indexOf('../') === 0 ? '../' : '';
    var rest = href.slice(up.length), segs = rest.split('/');
    if (!rest || /^[a-z][a-z0-9+.-]*:/i.test(rest) || /\\/.test(rest) ||
        segs.some(function (s) { return s === '' || s === '.' || s === '..'; }))
      return '#';
    return up + segs.map(encodeURIComponent).join('/');
  };

  PD.escapeHtml = function (s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  };

  /* Numbers ------------------------------------------------------------------------- */
  function sig(v, digits) {
    if (typeof v !== 'number' || !isFinite(v)) return '–';
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e5) return Math.round(v).toLocaleString('en-US');
    return String(Number(v.toPrecision(digits)));
  }
  PD.fmt = {
    num: function (v) { return sig(v, 4); },
    /* Below a millisecond in µs, so narrow columns stay readable ("349 µs", not "0.3485 ms"). */
    ms: function (v) {
      if (typeof v !== 'number' || !isFinite(v)) return '–';
      return v !== 0 && Math.abs(v) < 1 ? sig(v * 1000, 3) + ' µs' : sig(v, 4) + ' ms';
    },
    pct: function (ratio) { return typeof ratio === 'number' && isFinite(ratio) ? sig(ratio * 100, 3) + '%' : '–'; },
    /* Already a percentage (the seed's "avg throughput (%)"). */
    percent: function (v) { return typeof v === 'number' ? sig(v, 3) + '%' : '–'; },
    times: function (v) { return typeof v === 'number' ? sig(v, 3) + '×' : '–'; },
    /* A finding's saving as its sentence writes it (diagnose/finding_list.c: pt_put_ms,
     * pt_percent), so the card repeats the sentence's figure digit for digit: whole ms from
     * 100 ms, else 3 significant digits; a share whole from 9.5%, else 2 significant digits. */
    savedMs: function (v) {
      if (typeof v !== 'number' || !isFinite(v)) return '–';
      return (v >= 100 ? String(Math.round(v)) : String(Number(v.toPrecision(3)))) + ' ms';
    },
    savedPct: function (ratio) {
      if (typeof ratio !== 'number' || !isFinite(ratio)) return '–';
      var p = 100 * ratio;
      return (p >= 9.5 || p === 0 ? String(Math.round(p)) : String(Number(p.toPrecision(2)))) + '%';
    },
    signedPct: function (ratio) {
      if (typeof ratio !== 'number' || !isFinite(ratio)) return '–';
      return (ratio > 0 ? '+' : '') + sig(ratio * 100, 3) + '%';
    }
  };

  /* Names ---------------------------------------------------------------------------- */

  /* Splits "name<gx>_<gy>_<gz>|<bx>_<by>_<bz>" (the seed's kernel key) into name and launch. */
  PD.splitKernelKey = function (key) {
    var m = /^([\s\S]*?)(\d+_\d+_\d+\|\d+_\d+_\d+)$/.exec(key);
    return m && m[1] ? { name: m[1], launch: m[2] } : { name: key, launch: '' };
  };

  /* Collapses the groups a C++ demangled name nests, outermost first: template arguments
   * after an identifier become <…>, a trailing parameter list becomes (…). */
  function collapseGroups(name) {
    var out = '', depth = 0, open = '', close = '';
    for (var i = 0; i < name.length; i++) {
      var c = name[i];
      if (depth === 0) {
        var prev = out.length ? out[out.length - 1] : '';
        if (c === '<' && /[\w:]/.test(prev)) { depth = 1; open = '<'; close = '>'; out += '<…'; continue; }
        if (c === '(' && /[\w>…]/.test(prev) && closingParenIsLast(name, i)) { depth = 1; open = '('; close = ')'; out += '(…'; continue; }
        out += c;
      } else {
        if (c === open) depth++;
        else if (c === close && --depth === 0) out += close;
      }
    }
    return depth ? name : out; /* unbalanced: leave it as it was */
  }
  function closingParenIsLast(name, start) {
    var depth = 0;
    for (var i = start; i < name.length; i++) {
      if (name[i] === '(') depth++;
      else if (name[i] === ')' && --depth === 0) return i === name.length - 1;
    }
    return false;
  }
  function middleEllipsis(s, max) {
    if (s.length <= max) return s;
    var head = Math.ceil((max - 1) * 0.65);
    return s.slice(0, head) + '…' + s.slice(s.length - (max - 1 - head));
  }

  /* text, shortened in the middle until it fits width px in font (the full text goes in a
   * title): a long file name keeps its start and its end. */
  var fitContext = null;
  /* A canvas of width x height CSS pixels drawn at the screen's pixel density; its 2D
   * context, scaled so that drawing is in CSS pixels. */
  PD.setupCanvas = function (canvas, width, height) {
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(width * dpr));
    canvas.height = Math.max(1, Math.round(height * dpr));
    canvas.style.width = width + 'px';
    canvas.style.height = height + 'px';
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  };

  PD.fitText = function (text, width, font) {
    text = String(text);
    fitContext = fitContext || document.createElement('canvas').getContext('2d');
    fitContext.font = font;
    if (fitContext.measureText(text).width <= width) return text;
    var lo = 1, hi = text.length - 1;
    while (lo < hi) { /* the longest shortening that fits */
      var mid = Math.ceil((lo + hi) / 2);
      if (fitContext.measureText(middleEllipsis(text, mid)).width <= width) lo = mid; else hi = mid - 1;
    }
    return middleEllipsis(text, lo);
  };

  /* A kernel name a person can scan; the full name goes in the title (hover). */
  PD.shortKernel = function (name, max) {
    var s = String(name).replace(/^void /, '').replace(/\(anonymous namespace\)/g, '(anon)');
    return middleEllipsis(collapseGroups(s), max || 64);
  };
  PD.shortKernelKey = function (key, max) {
    var k = PD.splitKernelKey(String(key));
    return PD.shortKernel(k.name, max) + (k.launch ? ' ' + k.launch : '');
  };

  /* A Python call stack "a.py: f|b.py: g|...", outermost frame first. */
  PD.stackFrames = function (stack) { return String(stack).split('|'); };
  /* A frame by its function alone: "a.py(74): f" and "engine: f" -> "f",
   * "<built-in function sleep>" and "<built-in method randn of ...>" -> "sleep", "randn". */
  PD.frameName = function (frame) {
    var f = String(frame), builtin = /^<built-in (?:function|method) ([^\s>]+)/.exec(f);
    if (builtin) return builtin[1];
    var colon = f.lastIndexOf(': ');
    return colon >= 0 && colon + 2 < f.length ? f.slice(colon + 2) : f;
  };
  /* The stack as a person reads it: the innermost frame first, then its callers
   * ("sleep ‹ load_batch ‹ train_step"), outer callers dropped to fit max characters. */
  PD.shortStack = function (stack, max) {
    max = max || 70;
    var frames = PD.stackFrames(stack).map(PD.frameName).reverse();
    var out = middleEllipsis(frames[0], max);
    for (var i = 1; i < frames.length; i++) {
      var next = out + ' ‹ ' + frames[i];
      if (next.length <= max) { out = next; continue; }
      var more = i + 1 < frames.length, room = max - out.length - 3 - (more ? 4 : 0);
      if (room < 8) return out + ' ‹ …';
      return out + ' ‹ ' + middleEllipsis(frames[i], room) + (more ? ' ‹ …' : ''); /* the caller, shortened */
    }
    return out;
  };

  /* A sentence whose `quoted` parts are code: text nodes and <code> elements, never
   * markup, so a name inside the quotes stays text whatever it holds. */
  PD.richText = function (text) {
    var parts = String(text).split('`');
    if (parts.length % 2 === 0) { /* an unpaired backtick stays a backtick */
      var last = parts.pop();
      parts[parts.length - 1] += '`' + last;
    }
    return parts.map(function (part, i) {
      return i % 2 ? PD.el('code', null, part) : part;
    }).filter(function (part) { return part !== ''; });
  };

  /* A function named in the heatmap or a finding, shortened by what kind it is. */
  PD.shortFunction = function (category, name, max) {
    if (category === 'python') return PD.shortStack(name, max);
    if (category === 'gpu_compute') return PD.shortKernelKey(name, max);
    if (category === 'communication') return PD.shortKernel(name, max);
    return middleEllipsis(String(name), max || 64);
  };

  /* The tooltip: one floating box, filled with text only. */
  PD.tooltip = {
    show: function (x, y, text) {
      var tip = document.getElementById('tooltip');
      tip.textContent = text;
      tip.hidden = false;
      var w = tip.offsetWidth, h = tip.offsetHeight;
      tip.style.left = Math.max(4, Math.min(x + 14, window.innerWidth - w - 8)) + 'px';
      tip.style.top = Math.max(4, Math.min(y + 14, window.innerHeight - h - 8)) + 'px';
    },
    hide: function () { document.getElementById('tooltip').hidden = true; }
  };

  /* The exposed-time categories of a step, in priority order (docs/report-schema.md). */
  PD.BREAKDOWN = [
    { key: 'compute_ms', label: 'compute', color: '#4c78a8' },
    { key: 'memory_ms', label: 'memory', color: '#72b7b2' },
    { key: 'communication_ms', label: 'communication', color: '#f58518' },
    { key: 'runtime_ms', label: 'CUDA runtime', color: '#b279a2' },
    { key: 'python_ms', label: 'Python', color: '#54a24b' },
    { key: 'idle_ms', label: 'idle', color: '#c9ced6' }
  ];

  /* The largest finite number of values, at least floor: a loop, since Math.max.apply
   * throws (RangeError) on arrays of some 100,000 and more. */
  PD.maxOf = function (values, floor) {
    var best = typeof floor === 'number' ? floor : -Infinity;
    for (var i = 0; i < values.length; i++) { var v = values[i]; if (typeof v === 'number' && v > best && isFinite(v)) best = v; }
    return best;
  };

  PD.median = function (values) {
    var v = values.filter(function (x) { return typeof x === 'number' && isFinite(x); }).sort(function (a, b) { return a - b; });
    if (!v.length) return NaN;
    var m = v.length >> 1;
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  };
})();
