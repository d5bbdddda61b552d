/* report_checks.js -- PerfDisplay on the reports real runs make (browser.test.js --source
 * reports; fixture.py prepare_reports): the real traces in ../shared/data/traces and synth
 * jobs of 1, 8 and 4096 ranks and a hang, at 1400 x 1000 as a reader's screen.
 *
 * Per view (Overview, Workers, Step timeline, Heatmap) of every report: a screenshot, and
 * nothing cut off: no text clipped by its box, nothing past the right edge unless a scroll
 * container holds it. Then, per item of issue 17:
 *   11  the Workers table shows every breakdown column up to idle without scrolling, headers
 *       whole, the finding's column marked (Python for the h200 slow data loader), and the
 *       rank column stays when the table scrolls sideways;
 *   12  heatmap column labels whole and inside the header, the Python one innermost frame
 *       first with the full stack on hover; row labels whole; a small job's rows tall;
 *   13  "Workers at a glance" labelled and drawn for one rank and for a hang; Hardware units;
 *       no check mark on a CPU-only job's empty GPU views; one rank of 128 is a sample, not
 *       127 missing workers; `quoted` names are code, the hostile one as text;
 *   14  the step timeline: per rank, busy and waiting up to each sync point, the rank that
 *       sets each step marked (the culprit of label.json / synth's expected.json); at 4096
 *       ranks only the visible rows exist.
 * And of issue 37:
 *    4  one figure per quantity: the Evidence panel's median is the median over every
 *       worker (computed here from report.json), or not called a median; a card's ms per
 *       step is its sentence's (impact x the step model's step, rounded as the sentence
 *       rounds); a finding that saves nothing has no card, only a line under "Not worth
 *       fixing";
 *    8  at 1400 and 900 px wide, every view of four reports: no text cut (strictly: a cell
 *       a fraction of a pixel short shows its ellipsis), nothing past the right edge unless
 *       a scroll box holds it; at 900 px the finding's Workers column in view.
 */
'use strict';
const path = require('path');
const fs = require('fs');

const VIEWS = ['overview', 'workers', 'timeline', 'heatmap'];

/* Text clipped by its own box, or anything past the viewport's right edge outside a scroll
 * container: a list of what, empty when all is readable. */
async function cutOff(page) {
  return page.evaluate(() => {
    const bad = [], vw = window.innerWidth;
    const describe = (e) => e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().replace(/\s+/g, '.') : '') +
      ' "' + e.textContent.trim().slice(0, 40) + '"';
    const inScroller = (e) => {
      for (let p = e.parentElement; p; p = p.parentElement) {
        const cs = getComputedStyle(p);
        if (/(auto|scroll)/.test(cs.overflowX) && p.scrollWidth > p.clientWidth) return true;
      }
      return false;
    };
    const nodes = [document.getElementById('job-line')].concat(Array.from(document.querySelectorAll('section.view *')));
    for (const e of nodes) {
      const r = e.getBoundingClientRect();
      if (!r.width || !r.height || e.closest('details:not([open])')) continue;
      const cs = getComputedStyle(e), text = e.textContent.trim();
      const clips = /(hidden|clip)/.test(cs.overflowX) || cs.textOverflow === 'ellipsis';
      if (text && clips && e.scrollWidth > e.clientWidth) bad.push('clipped: ' + describe(e));
      if (text && /(hidden|clip)/.test(cs.overflowY) && e.scrollHeight > e.clientHeight + 1) bad.push('clipped at the bottom: ' + describe(e));
      if (r.right > vw + 0.5 && !inScroller(e)) bad.push('past the right edge: ' + describe(e));
    }
    return bad.slice(0, 8);
  });
}

async function runReports(ctx, browser, base, displayDir, facts) {
  const { args, check } = ctx;
  const shots = path.join(args.work, 'screenshots', 'reports');
  fs.mkdirSync(shots, { recursive: true });
  /* browser is a persistent context, whose newPage() takes no options: size the page itself. */
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 1000 });
  const dialogs = [], errors = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => errors.push(String(e)));
  const reports = facts.reports, expected = facts.expected;
  const has = (name) => !!reports[name];
  for (const missing of facts.missing_traces) console.log('note: no ' + missing + ': its checks are skipped');

  /* The first report through the server, the others from file:// (both must work). */
  async function open(name, hash) {
    const url = reports[name] === displayDir ? base + 'index.html' : 'file://' + path.join(reports[name], 'index.html');
    await page.goto(url + (hash || ''));
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
    await page.waitForTimeout(150); /* charts and canvases draw after the first frame */
  }

  /* Screenshots and the cut-off check, per view of every report. */
  for (const name of Object.keys(reports)) {
    for (const view of VIEWS) {
      await open(name, '#/' + view);
      const shown = await page.getAttribute('section.view', 'data-view');
      if (shown !== view) { /* only a report without steps has no timeline */
        const steps = await page.evaluate(() => window.PT_REPORT.workers.some((w) => (w.steps || []).length));
        check(view === 'timeline' && !steps, name + ': has a ' + view + ' view');
        continue;
      }
      await page.screenshot({ path: path.join(shots, name + '-' + view + '.png') });
      const cut = await cutOff(page);
      check(cut.length === 0, name + ' ' + view + ': nothing cut off at 1400 px (' + cut.join('; ') + ')');
    }
  }

  /* 11. Workers: the breakdown up to idle in view, headers whole, the finding's column
   * marked, the rank column fixed when scrolled sideways. */
  for (const [name, column] of [['h200_slowdata', 'Python'], ['synth8', 'Python'], ['large', 'compute'], ['dlrm', 'communication']]) {
    if (!has(name)) continue;
    await open(name, '#/workers');
    const t = await page.evaluate(() => {
      const table = document.querySelector('section.view .vtable'), scroll = table.querySelector('.scroll');
      const box = scroll.getBoundingClientRect(), right = box.left + scroll.clientWidth;
      const heads = Array.from(table.querySelectorAll('th')).map((th) => {
        const r = th.getBoundingClientRect();
        return { label: th.textContent, whole: th.scrollWidth <= th.clientWidth + 1, inView: r.left >= box.left - 1 && r.right <= right + 1,
                 marked: th.classList.contains('finding-col') };
      });
      const cells = Array.from(table.querySelectorAll('tr.data')).slice(0, 5).map((tr) => Array.from(tr.children).map((td) => td.scrollWidth <= td.clientWidth + 1));
      scroll.scrollLeft = scroll.scrollWidth;
      const rankCell = table.querySelector('tr.data td'), rr = rankCell.getBoundingClientRect();
      return { heads, cells, rankStays: Math.abs(rr.left - box.left) <= 2 && scroll.scrollLeft > 0, rankText: rankCell.textContent,
               scrolls: scroll.scrollWidth > scroll.clientWidth };
    });
    const upTo = t.heads.findIndex((h) => h.label === 'idle');
    const core = t.heads.slice(0, upTo + 1);
    check(upTo > 0 && core.every((h) => h.inView && h.whole), name + ': Workers columns rank..idle in view and whole at 1400 px (' +
      core.filter((h) => !h.inView || !h.whole).map((h) => h.label).join(', ') + ')');
    check(t.heads.some((h) => h.label === column && h.inView), name + ': the ' + column + ' column is not cut off');
    const marked = t.heads.filter((h) => h.marked).map((h) => h.label);
    check(marked.length === 1 && marked[0] === column, name + ': the finding\'s column is marked (' + marked.join(', ') + ', expected ' + column + ')');
    check(t.cells.every((row) => row.slice(0, upTo + 1).every(Boolean)), name + ': no Workers cell up to idle is clipped');
    check(!t.scrolls || (t.rankStays && /^\d+$/.test(t.rankText.trim())), name + ': scrolled sideways, the rank column stays in place');
  }

  /* 12. Heatmap labels. */
  for (const name of ['h200_slowdata', 'synth8', 'synth1', 'dlrm']) {
    if (!has(name)) continue;
    await open(name, '#/heatmap?finding=0');
    await page.waitForSelector('#heatmap .rowlabel');
    await page.waitForTimeout(100); /* scrolled to the finding's worker */
    const h = await page.evaluate(() => {
      const hm = document.getElementById('heatmap'), cols = hm.querySelector('.cols').getBoundingClientRect();
      const labels = Array.from(hm.querySelectorAll('.col')).map((c) => {
        const s = c.querySelector('span'), r = s.getBoundingClientRect();
        return { text: s.textContent, title: c.title, inside: r.top >= cols.top - 1 && r.bottom <= cols.bottom + 1 && r.left >= 0 && r.right <= window.innerWidth,
                 upright: r.height > r.width };
      });
      const rows = Array.from(hm.querySelectorAll('.rowlabel')).map((l) => ({ text: l.textContent, title: l.title, whole: l.scrollWidth <= l.clientWidth + 1, h: l.getBoundingClientRect().height }));
      const grid = hm.querySelector('.scroll').getBoundingClientRect();
      return { labels, rows, gridH: grid.height, n: hm.ptHeatmap.ranks.length };
    });
    check(h.labels.length > 0 && h.labels.every((l) => l.inside && l.upright), name + ': every heatmap column label stands whole inside the header (' +
      h.labels.filter((l) => !l.inside).map((l) => l.text).slice(0, 3).join(' | ') + ')');
    const named = (r) => { /* the worker's name, or its start and end around a "…", the whole on hover */
      const shown = r.text.replace(/^▶ /, '').split(' · ')[1] || '', parts = shown.split('…');
      return parts.length === 1 ? r.title.endsWith(shown) : parts.length === 2 && r.title.includes(parts[0]) && r.title.endsWith(parts[1]);
    };
    check(h.rows.every((r) => r.whole && named(r)),
      name + ': heatmap row labels whole, the worker\'s name in them (' + h.rows.filter((r) => !r.whole || !named(r)).map((r) => r.text).join(', ') + ')');
    check(h.n > 8 || h.rows.every((r) => r.h >= 28), name + ': a small job\'s heatmap rows are tall, not a thin strip (' + h.rows.map((r) => r.h).join(',') + ' px)');
    const want = expected[name];
    if (want && want.frame) {
      const col = h.labels.find((l) => l.title.indexOf(want.frame) >= 0 && l.title.endsWith('sleep>'));
      check(!!col && col.text.startsWith(want.innermost + ' ‹ load_batch'), name + ': the Python column reads innermost frame first (' + (col ? col.text : 'none') + ')');
      check(!!col && col.title.startsWith('python: ') && col.title.split('|').length > 2, name + ': the full stack on hover');
    }
  }

  /* 13. Workers at a glance: labelled, and not empty for one rank or a hang. */
  if (has('synth8')) {
    await open('synth8', '#/overview');
    const ticks = await page.$eval('#glance canvas', (c) => c.dataset.ticks).catch(() => '');
    check(ticks === '0,1,2,3,4,5,6,7', 'Workers at a glance labels every rank of 8, not its two ends (' + ticks + ')');
    const marks = await page.$eval('#glance canvas', (c) => c.dataset.marks).catch(() => '');
    check(marks === 'rank ' + expected.synth8.culprit, 'the culprit\'s bar is labelled (' + marks + ')');
  }
  if (has('synth1')) {
    await open('synth1', '#/overview');
    const steps = await page.$$eval('#glance .glance-step', (rows) => rows.map((r) => [r.textContent, r.querySelectorAll('.stack span').length]));
    check(steps.length === 3 && steps.every((s) => /^step \d+/.test(s[0]) && s[1] > 0), 'one rank: Workers at a glance shows its 3 steps as bars (' + JSON.stringify(steps) + ')');
    check(!/among the 1 workers/.test(await page.textContent('#verdict')), 'one rank: no "among the 1 workers"');
  }
  if (has('hang')) {
    await open('hang', '#/overview');
    const marks = await page.$eval('#glance canvas', (c) => c.dataset.marks).catch(() => '');
    check(marks.includes('rank ' + expected.hang.culprit + ': hang'), 'hang: Workers at a glance marks the hung rank (' + marks + ')');
    const red = await page.$eval('#glance canvas', (c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 80 && d[i + 2] < 80) n++;
      return n;
    }).catch(() => 0);
    check(red > 200, 'hang: the hung rank\'s bar is drawn (' + red + ' red pixels)');
  }
  /* Hardware units. */
  if (has('h200_native')) {
    await open('h200_native', '#/hardware');
    const units = await page.evaluate(() => {
      const t = document.querySelector('section.view .vtable').ptTable;
      return t.rows.map((e) => [e[0], e[1].unit]);
    });
    const byName = Object.fromEntries(units);
    check(units.length > 0 && units.every((u) => u[1]), 'Hardware: every metric has a unit (' + units.filter((u) => !u[1]).map((u) => u[0]).join(', ') + ')');
    check(byName['host.mem_used'] === '%' && byName['proc.rss_mb'] === 'MiB', 'Hardware: host.mem_used in %, proc.rss_mb in MiB');
  }
  /* No check mark on a CPU-only job's empty GPU views. */
  if (has('cpu_only')) {
    await open('cpu_only', '#/overview');
    const counts = await page.$$eval('#nav a', (as) => Object.fromEntries(as.map((a) => [a.dataset.view, (a.querySelector('.count') || {}).textContent || ''])));
    check(['gpu-compute', 'gpu-memory', 'cuda-runtime'].every((v) => counts[v] !== '✓'), 'CPU-only: no ✓ on the empty GPU views (' + JSON.stringify(counts) + ')');
    await open('cpu_only', '#/gpu-compute');
    check(!!(await page.$('#empty-section')), 'CPU-only: GPU Compute says there was no GPU work');
  }
  /* One rank of 128 (and rank 0 of 8): a sample. */
  for (const [name, world] of [['sampled', 128], ['b200', 8]]) {
    if (!has(name)) continue;
    await open(name, '#/overview');
    const line = await page.textContent('#job-line'), verdict = await page.textContent('#verdict');
    check(line.startsWith('1 of ' + world + ' workers'), name + ': the header says 1 of ' + world + ' workers (' + line + ')');
    check(!/among the 1 workers/.test(verdict), name + ': the verdict does not say "among the 1 workers" (' + verdict + ')');
    check(!!(await page.$('#sample-note')), name + ': the Overview says the report is a sample');
    await open(name, '#/workers');
    const rows = await page.evaluate(() => document.querySelector('section.view .vtable').ptTable.rows.map((w) => w.status));
    const red = await page.$$eval('section.view .vtable .status-missing', (s) => s.length);
    check(rows.length === 1 && !rows.includes('missing') && red === 0, name + ': Workers lists the 1 rank, no "missing" rows (' + rows.length + ' rows, ' + red + ' red)');
    check((await page.textContent('#nav a[data-view="workers"] .count')) === '1', name + ': the navigation counts 1 worker');
  }
  /* Backticks: code, and a hostile name inside them stays text. */
  if (has('h200_slowdata')) {
    await open('h200_slowdata', '#/overview');
    const root = await page.evaluate(() => {
      const s = document.querySelector('#findings .finding.root .summary');
      return { text: s.textContent, codes: Array.from(s.querySelectorAll('code')).map((c) => c.textContent) };
    });
    check(!root.text.includes('`') && root.codes.length > 0, 'the root cause\'s `quoted` stack is code, no backticks shown (' + root.codes.join(' | ') + ')');
    check(root.codes.some((c) => c.includes(expected.h200_slowdata.frame)), 'the hostile frame inside it is text (' + root.codes[0] + ')');
    check(await page.evaluate(() => document.querySelectorAll('img').length) === 0, 'no <img> from the hostile frame');
  }

  /* 14. The step timeline. */
  for (const name of ['h200_slowdata', 'synth8', 'large']) {
    if (!has(name)) continue;
    const culprit = expected[name].culprit;
    await open(name, '#/timeline');
    if (!(await page.$('#timeline .rowlabel'))) { check(false, name + ': a step timeline'); continue; }
    const tl = await page.evaluate((culprit) => {
      const node = document.getElementById('timeline'), t = node.ptTimeline;
      t.scrollToRank(culprit);
      const label = node.querySelector('.rowlabel[data-rank="' + culprit + '"]');
      const other = Array.from(node.querySelectorAll('.rowlabel')).find((l) => Number(l.dataset.rank) !== culprit);
      const canvas = node.querySelector('canvas'), kr = canvas.getBoundingClientRect(), dpr = canvas.width / kr.width;
      const ctx = canvas.getContext('2d');
      /* Along each row's middle, over the first step: how much of it is busy (blue). */
      const busyShare = (l) => {
        const lr = l.getBoundingClientRect(), y = Math.floor((lr.top + lr.height / 2 - kr.top) * dpr);
        const x1 = Math.floor(t.stepMs[0] * t.pxPerMs * dpr), px = ctx.getImageData(0, y, x1, 1).data;
        let busy = 0;
        for (let i = 0; i < px.length; i += 4) if (px[i] < 110 && px[i + 1] > 90 && px[i + 1] < 150 && px[i + 2] > 140) busy++;
        return busy / (px.length / 4);
      };
      const lr = label.getBoundingClientRect(), top = ctx.getImageData(Math.floor(20 * dpr), Math.floor((lr.top - kr.top + 1) * dpr), 1, 1).data;
      return { pacers: node.dataset.pacers, setters: Array.from(node.querySelectorAll('#step-setters li')).map((li) => li.textContent),
               pacerLabel: label.classList.contains('pacer'), otherLabel: other ? other.classList.contains('pacer') : false,
               culpritBusy: busyShare(label), otherBusy: other ? busyShare(other) : 0, outline: Array.from(top.slice(0, 3)),
               domRows: node.querySelectorAll('.rowlabel').length, rows: t.rows.length,
               heads: Array.from(node.querySelectorAll('.tl-step')).map((s) => s.scrollWidth <= s.clientWidth + 1 && s.getBoundingClientRect().right <= window.innerWidth) };
    }, culprit);
    const steps = tl.pacers.split(',');
    check(steps.length >= 2 && steps.every((r) => r === String(culprit)), name + ': the timeline marks rank ' + culprit + ' as setting every step (' + tl.pacers + ')');
    check(tl.setters.length === steps.length && tl.setters.every((s) => s.includes('rank ' + culprit + ' sets the step time')), name + ': one sentence per step names it (' + tl.setters[0] + ')');
    check(tl.pacerLabel && !tl.otherLabel, name + ': its row label is marked, another rank\'s is not');
    check(tl.culpritBusy > tl.otherBusy + 0.15, name + ': it is busy where the others wait (busy ' + tl.culpritBusy.toFixed(2) + ' of step 1 against ' + tl.otherBusy.toFixed(2) + ')');
    check(tl.outline[0] > 150 && tl.outline[1] < 90, name + ': its step is outlined in red (' + tl.outline + ')');
    check(tl.heads.every(Boolean), name + ': every step heading is whole');
    check(tl.rows === expected[name].workers || name === 'h200_slowdata', name + ': a row per rank (' + tl.rows + ')');
    check(tl.domRows <= 120, name + ': only the visible rows are in the DOM (' + tl.domRows + ' of ' + tl.rows + ')');
    if (name === 'h200_slowdata') await page.screenshot({ path: path.join(shots, 'timeline-culprit.png') });
  }
  if (has('hang')) {
    await open('hang', '#/timeline');
    check(((await page.textContent('#step-setters').catch(() => '')) || '').includes('no rank holds it up'), 'hang: steps whose busiest rank leads by noise name no setter');
  }
  if (has('dlrm')) {
    await open('dlrm', '#/timeline');
    const d = await page.evaluate(() => {
      const t = (document.getElementById('timeline') || {}).ptTimeline;
      return t ? { rows: t.rows.length, syncs: t.rows.map((w) => (w.steps[0].syncs || []).length) } : { rows: 0, syncs: [] };
    });
    check(d.rows === 8 && d.syncs.every((n) => n > 0), 'dlrm: 8 ranks, each step drawn up to its sync points (' + d.syncs + ')');
  }

  await consistentFigures(ctx, page, open, reports);
  await atCommonWidths(ctx, page, open, reports, shots);

  check(dialogs.length === 0, 'reports: no dialog opened (' + dialogs.join(', ') + ')');
  check(errors.length === 0, 'reports: no script errors (' + errors.slice(0, 3).join(' | ') + ')');
  await page.close();
}

/* Issue 37, item 4 ---------------------------------------------------------------------- */
const median = (xs) => { const v = xs.slice().sort((a, b) => a - b), m = v.length >> 1; return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2; };
/* A finding's saving as diagnose/finding_list.c writes it (pt_put_ms): whole ms from 100. */
const sentenceMs = (v) => (v >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(3)))) + ' ms';
const SAVES_NOTHING = 0.0005; /* "0.0%" at the terminal's one decimal */
const savesNothing = (f) => typeof f.impact === 'number' && f.impact < SAVES_NOTHING && !['hang', 'lost'].includes(f.category) && (f.workers || []).length > 0;

/* The median over every analysed worker of a finding's evidence metric, from report.json, or
 * null when the report does not hold every worker's value: the named values when they are
 * every worker's; a function's "bottleneck ms per step" from the heatmap, whose cells are
 * each worker's value less the median worker's over the step (so every worker's value is a
 * named worker's moved by the difference of their cells; the tolerance is the cells'
 * rounding to 4 digits); a "(median over workers)" metric's own figure. */
function everyWorkerMedian(report, f) {
  const ev = f.evidence || {}, values = Object.entries(ev.values || {}).map(([r, v]) => [Number(r), v]);
  if (['hang', 'lost'].includes(f.category) || !ev.metric) return null;
  const analysed = new Set(report.workers.filter((w) => w.status !== 'missing').map((w) => w.rank));
  const n = typeof report.job.workers_analyzed === 'number' ? report.job.workers_analyzed : analysed.size;
  if (values.length && values.length === n && values.every(([r]) => analysed.has(r))) return { value: median(values.map((v) => v[1])), tol: 0, over: n };
  const h = report.Heatmap || {}, step = report.job.median_step_time_ms, j = (h.functions || []).findIndex((fn) => fn.name === ev.key);
  const named = values.find(([r]) => (h.ranks || []).includes(r));
  if (ev.metric === 'bottleneck ms per step' && j >= 0 && named && (h.ranks || []).length === n) {
    const cell = (r) => h.values[h.ranks.indexOf(r)][j], d0 = cell(named[0]);
    const every = h.ranks.map((r) => named[1] + (cell(r) - d0) * step);
    const widest = Math.max(...h.ranks.map((r) => Math.abs(cell(r))));
    return { value: median(every), tol: 2 * widest * step * 5e-4, over: n };
  }
  if (/\(median over workers\)/.test(ev.metric) && typeof ev.median === 'number') return { value: ev.median, tol: 0, over: n };
  return null;
}

async function consistentFigures(ctx, page, open, reports) {
  const { check } = ctx, counts = { medians: 0, cards: 0, folded: 0 };
  for (const name of Object.keys(reports)) {
    const report = JSON.parse(fs.readFileSync(path.join(reports[name], 'report.json'), 'utf8'));
    await figuresAgree(ctx, page, (hash) => open(name, hash), name, report, counts);
  }
  check(counts.medians >= 4 && counts.cards >= 4, 'Evidence medians (' + counts.medians + ') and card figures (' + counts.cards + ') were checked');
  check(counts.banners >= 1, 'an input banner was checked (the partial report has one)');
  if (!counts.folded) console.log('note: no report here has a finding that saves nothing (make_report.py\'s does: display.browser.generated)');
}

/* One report's figures (open(hash) shows its page at hash); counts what it checked. */
async function figuresAgree(ctx, page, open, name, report, counts) {
  const { check } = ctx;
  const findings = report.diagnosis.findings || [];
  /* The Evidence panel: a median is over every worker. */
  for (let i = 0; i < findings.length; i++) {
    const f = findings[i], want = everyWorkerMedian(report, f);
    if (['hang', 'lost'].includes(f.category) || !(f.evidence || {}).metric) continue;
    await open('#/workers?finding=' + i);
    /* What the panel says after the metric's name, as a reader sees it. */
    const got = await page.evaluate((metric) => {
      const line = Array.from(document.querySelectorAll('#evidence p')).find((p) => p.textContent.startsWith('Metric: '));
      const heads = Array.from(document.querySelectorAll('#evidence th')).map((t) => t.textContent);
      return { text: line ? line.textContent.slice(('Metric: ' + metric).length).replace(/^ · /, '') : '', heads };
    }, f.evidence.metric);
    const said = /^(.*?): (−?-?[\d,.]+)$/.exec(got.text), shown = said ? Number(said[2].replace(/,/g, '').replace('−', '-')) : NaN;
    counts.panels = (counts.panels || 0) + 1;
    if (want) {
      counts.medians++;
      /* Shown with 4 significant digits. */
      const ok = !!said && said[1] === (want.over === 1 ? 'the one worker analysed' : 'median over all ' + want.over + ' workers') &&
        Math.abs(shown - want.value) <= want.tol + 5e-4 * Math.abs(want.value) + 1e-9;
      check(ok, name + ' finding ' + (i + 1) + ': the Evidence median is the median over every worker, ' + want.value + ' (shown: "' + got.text + '")');
    } else {
      check(!/median/.test(got.text.replace('not a median', '')) && !got.heads.includes('× median'),
        name + ' finding ' + (i + 1) + ': a figure that is no median over every worker is not called one ("' + got.text + '")');
    }
  }
  /* The cards: the ms per step of the sentence; none for a finding that saves nothing. */
  await open('#/overview');
  const shown = await page.$$eval('#findings .finding', (fs) => fs.map((f) => ({ index: Number(f.dataset.index), impact: (f.querySelector('.facts') || f).textContent, summary: f.querySelector('.summary').textContent })));
  const notWorth = await page.$$eval('#not-worth-fixing li', (ls) => ls.map((l) => Number(l.dataset.index)));
  const model = (report.diagnosis.step_model || {}).step_ms;
  /* A partial or mixed input is said with the verdict, in the report's own words. */
  const banner = await page.$eval('#input-problem', (p) => p.textContent).catch(() => null);
  check(banner === (report.diagnosis.input_problem || null),
    name + ': the verdict\'s input banner is the report\'s input_problem (' + JSON.stringify(report.diagnosis.input_problem) + '; shown: ' + JSON.stringify(banner) + ')');
  if (banner) counts.banners = (counts.banners || 0) + 1;
  for (let i = 0; i < findings.length; i++) {
    const f = findings[i], card = shown.find((c) => c.index === i);
    if (savesNothing(f)) {
      counts.folded++;
      check(!card && notWorth.includes(i), name + ' finding ' + (i + 1) + ' (impact ' + f.impact + ') saves nothing: no card, listed under "Not worth fixing"');
      continue;
    }
    if (!card || typeof model !== 'number' || typeof f.impact !== 'number' || f.category === 'hang' || f.category === 'lost') continue;
    const ms = sentenceMs(typeof f.saves_ms === 'number' ? f.saves_ms : f.impact * model);
    counts.cards++;
    check(card.impact.includes('≈' + ms + ' per step') && (!/ saves /.test(f.summary) || f.summary.includes(ms)),
      name + ' finding ' + (i + 1) + ': the card\'s ms per step is the sentence\'s, ' + ms + ' (card: "' + card.impact.trim().split('Workers:')[0] + '")');
  }
}

/* Issue 37, item 8 ---------------------------------------------------------------------- */
async function atCommonWidths(ctx, page, open, reports, shots) {
  const { check } = ctx;
  for (const width of [1400, 900]) {
    await page.setViewportSize({ width, height: 1000 });
    for (const name of ['h200_slowdata', 'h200_native', 'dlrm', 'synth8']) {
      if (!reports[name]) continue;
      await open(name, '#/overview');
      const views = await page.$$eval('#nav a', (as) => as.map((a) => a.dataset.view));
      const cut = [];
      for (const view of views) {
        await open(name, '#/' + view);
        for (const c of await cutOff(page)) cut.push(view + ': ' + c);
        if (name === 'h200_slowdata' && ['overview', 'workers'].includes(view)) await page.screenshot({ path: path.join(shots, name + '-' + view + '-' + width + '.png') });
      }
      check(cut.length === 0, name + ' at ' + width + ' px: nothing cut off in ' + views.length + ' views (' + cut.slice(0, 4).join('; ') + ')');
    }
    for (const [name, column] of [['h200_slowdata', 'Python'], ['synth8', 'Python']]) {
      if (!reports[name]) continue;
      await open(name, '#/workers');
      const seen = await page.evaluate((column) => {
        const scroll = document.querySelector('section.view .vtable .scroll'), box = scroll.getBoundingClientRect();
        const th = Array.from(scroll.querySelectorAll('th')).find((t) => t.textContent === column);
        const r = th ? th.getBoundingClientRect() : null;
        return !!r && r.left >= box.left - 1 && r.right <= box.left + scroll.clientWidth + 1 && r.right <= window.innerWidth;
      }, column);
      check(seen, name + ' at ' + width + ' px: the finding\'s Workers column (' + column + ') is in view');
    }
  }
  await page.setViewportSize({ width: 1400, height: 1000 });
}

module.exports = { runReports, cutOff, figuresAgree, savesNothing };
