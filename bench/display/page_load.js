#!/usr/bin/env node
/* page_load.js -- how PerfDisplay scales with workers, in headless Chromium: the same page
 * and steps for a report of 1024 workers (the baseline, measured in the same run; the full
 * form) and for 10,000 and 100,000 in the bounded form perftracker writes above 4096
 * workers (docs/report-schema.md; make_report.py --bounded, its parts beside it).
 *
 *   node page_load.js --perftracker BIN --work DIR --node-modules DIR [--runs 3]
 *        [--sizes 1024,10000,100000] [--full 10000]   (sizes also in the full form)
 *   (make bench runs it through bench_page_load.sh)
 *
 * Prints, per measurement, the median over runs for each size and its ratio to the baseline:
 *   load          navigation to first view drawn (parse data.js + overview)
 *   <view>        each view of the navigation opened (drawn, one frame later)
 *   slowest view  the largest of those
 *   node open     one heatmap node opened onto its ranks (its part loaded, bounded form)
 *   heatmap frame one redraw of the visible heatmap rows (should stay ~1x)
 *   table scroll  scroll the workers table to 40 places, redraw each (ditto)
 * and the goals at the largest size: load <= 3 s, every view <= 1 s. Ratios are the
 * claim across machines; the goals are absolute, measured on this one. */
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const perftracker = arg('perftracker'), work = path.resolve(arg('work', '/tmp/pt-bench-display')); // file:// URLs need it absolute
const runs = Number(arg('runs', 3));
const sizes = arg('sizes', '1024,10000,100000').split(',').map(Number);
const fullToo = arg('full', '').split(',').filter(Boolean).map(Number);
const playwright = require(path.join(path.resolve(arg('node-modules')), 'playwright-core'));
const fixture = path.join(__dirname, '..', '..', 'tests', 'display', 'fixture.py');
const LOAD_GOAL_MS = 3000, VIEW_GOAL_MS = 1000;

/* The form perftracker writes for that many workers (bounded above 4096), or the full one. */
function prepare(workers, full) {
  const source = !full && workers > 4096 ? 'bounded' : 'generated';
  const out = execFileSync('python3', [fixture, 'prepare', '--work', path.join(work, source + '-' + workers),
    '--perftracker', perftracker, '--source', source, '--workers', String(workers), '--fault-rank', String(Math.floor(workers * 0.77))],
  { encoding: 'utf8', maxBuffer: 1 << 26 });
  const prepared = JSON.parse(out.trim().split('\n').pop());
  return { dir: prepared.display_dir, facts: prepared.facts, label: workers + (source === 'bounded' ? ' bounded' : ' full') };
}

const frame = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))));

async function measure(browser, { dir, facts }) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  let t = Date.now();
  await page.goto('file://' + path.join(dir, 'index.html'));
  await page.waitForSelector('body[data-ready="true"]', { timeout: 180000 });
  const m = { load: Date.now() - t, views: {} };
  const open = async (hash, selector) => {
    const start = Date.now();
    await page.evaluate((h) => { location.hash = h; }, hash);
    await page.waitForSelector(selector, { timeout: 60000 });
    await frame(page);
    return Date.now() - start;
  };
  const views = await page.$$eval('#nav a', (as) => as.map((a) => a.dataset.view));
  for (const v of views) {
    await open('#/overview', 'section.view[data-view="overview"]');
    m.views[v] = await open('#/' + v, 'section.view[data-view="' + v + '"]');
  }
  await open('#/heatmap', '#heatmap .rowlabel');
  m.frame = await page.evaluate(() => {
    const hm = document.getElementById('heatmap').ptHeatmap, n = 50, t0 = performance.now();
    for (let i = 0; i < n; i++) { hm.scroll.scrollTop = i * 37; hm.render(); }
    return (performance.now() - t0) / n;
  });
  /* A node opened onto its ranks (in the bounded form its part is loaded first). */
  t = Date.now();
  const grouped = await page.evaluate((rank) => {
    const h = document.getElementById('heatmap').ptHeatmap;
    if (!h.grouped) return false;
    h.scrollToRank(rank);
    return true;
  }, facts.fault_rank);
  if (grouped) {
    await page.waitForFunction((rank) => {
      const h = document.getElementById('heatmap').ptHeatmap, row = h.order.find((r) => r.rank === rank);
      return row && (row.index >= 0 || row.values);
    }, facts.fault_rank, { timeout: 60000 });
    await frame(page);
    m.node = Date.now() - t;
  }
  await open('#/workers', 'section.view[data-view="workers"] .vtable tr.data');
  m.scroll = await page.evaluate(() => {
    const t = document.getElementById('workers-table').ptTable, n = 40, t0 = performance.now();
    const max = t.scroll.scrollHeight;
    for (let i = 0; i < n; i++) { t.scroll.scrollTop = (i / n) * max; t.render(); }
    return (performance.now() - t0) / n;
  });
  m.errors = errors;
  await page.close();
  return m;
}

const median = (v) => v.filter((x) => typeof x === 'number').sort((a, b) => a - b)[(v.length - 1) >> 1];

(async () => {
  const reports = sizes.map((n) => prepare(n, false)).concat(fullToo.map((n) => prepare(n, true)));
  const browser = await playwright.chromium.launch({ executablePath: process.env.PT_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
  const results = reports.map(() => []);
  for (let r = 0; r < runs; r++) {
    for (let i = 0; i < reports.length; i++) results[i].push(await measure(browser, reports[i]));
  }
  await browser.close();
  const size = (d) => fs.statSync(path.join(d, 'data.js')).size;
  const viewNames = Object.keys(results[results.length - 1][0].views);
  const rows = [['load', (m) => m.load, 'ms']]
    .concat(viewNames.map((v) => ['view ' + v, (m) => m.views[v], 'ms']))
    .concat([['slowest view', (m) => Math.max(...Object.values(m.views)), 'ms'], ['node open', (m) => m.node, 'ms'],
             ['heatmap frame', (m) => m.frame, 'ms'], ['table scroll', (m) => m.scroll, 'ms/redraw']]);
  console.log('PerfDisplay page, median of ' + runs + ' runs; ratios against ' + reports[0].label + ' workers');
  console.log('data.js'.padEnd(20) + reports.map((r) => (r.label + ': ' + (size(r.dir) / 1048576).toFixed(1) + ' MB').padStart(26)).join(''));
  for (const [label, get, unit] of rows) {
    const med = results.map((rs) => median(rs.map(get)));
    if (med.every((x) => x === undefined)) continue;
    const base = med[0];
    console.log(label.padEnd(20) + med.map((x, i) => (x === undefined ? '–' : x.toFixed(1) + (i ? ' (' + (x / Math.max(base || 0, 1e-3)).toFixed(2) + 'x)' : '')).padStart(26)).join('') + ' ' + unit);
  }
  /* The goals, at the largest size perftracker would write (bounded). */
  const last = sizes.length - 1, at = results[last];
  const load = median(at.map((m) => m.load)), slowest = median(at.map((m) => Math.max(...Object.values(m.views))));
  console.log('goal at ' + reports[last].label + ': load ' + load.toFixed(0) + ' ms <= ' + LOAD_GOAL_MS + ' ' + (load <= LOAD_GOAL_MS ? 'MET' : 'MISSED') +
              ', slowest view ' + slowest.toFixed(0) + ' ms <= ' + VIEW_GOAL_MS + ' ' + (slowest <= VIEW_GOAL_MS ? 'MET' : 'MISSED'));
  const errs = [].concat(...results.map((rs) => [].concat(...rs.map((m) => m.errors))));
  if (errs.length) { console.log('script errors: ' + errs.slice(0, 3).join(' | ')); process.exit(1); }
})().catch((e) => { console.error(e); process.exit(1); });
