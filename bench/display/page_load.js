#!/usr/bin/env node
/* page_load.js -- how PerfDisplay scales with workers: the same page and steps for a report
 * of 128 workers (the baseline, measured in the same run: already more rows than fit on
 * screen) and of 4096, in headless Chromium.
 *
 *   node page_load.js --perftracker BIN --work DIR --node-modules DIR [--runs 3]
 *   (make bench runs it through bench_page_load.sh)
 *
 * Prints, per measurement, the median over runs for each size and the ratio 4096 / 128:
 *   load         navigation to first view drawn (parse data.js + overview)
 *   workers view open the Workers view (virtualised table + breakdown chart)
 *   heatmap view open the Heatmap view
 *   heatmap frame one redraw of the visible heatmap rows (should stay ~1x: only visible rows)
 *   table scroll  scroll the workers table to 40 places, redraw each (ditto)
 * Ratios, not absolute times, are the claim: the absolute numbers depend on the machine. */
'use strict';
const path = require('path');
const { execFileSync } = require('child_process');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const perftracker = arg('perftracker'), work = arg('work', '/tmp/pt-bench-display');
const runs = Number(arg('runs', 3));
const playwright = require(path.join(path.resolve(arg('node-modules')), 'playwright-core'));
const fixture = path.join(__dirname, '..', '..', 'tests', 'display', 'fixture.py');

function prepare(workers, fault) {
  const out = execFileSync('python3', [fixture, 'prepare', '--work', path.join(work, String(workers)),
    '--perftracker', perftracker, '--source', 'generated', '--workers', String(workers), '--fault-rank', String(fault)],
    { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop()).display_dir;
}

async function measure(browser, dir) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const url = 'file://' + path.join(dir, 'index.html');
  let t = Date.now();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  const load = Date.now() - t;
  const view = async (hash, selector) => {
    const start = Date.now();
    await page.evaluate((h) => { location.hash = h; }, hash);
    await page.waitForSelector(selector);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    return Date.now() - start;
  };
  const workers = await view('#/workers', 'section.view[data-view="workers"] .vtable tr.data');
  const heatmap = await view('#/heatmap', '#heatmap .rowlabel');
  const frame = await page.evaluate(() => {
    const hm = document.getElementById('heatmap').ptHeatmap, n = 50, t0 = performance.now();
    for (let i = 0; i < n; i++) { hm.scroll.scrollTop = i * 37; hm.render(); }
    return (performance.now() - t0) / n;
  });
  await view('#/workers', 'section.view[data-view="workers"] .vtable tr.data');
  const scroll = await page.evaluate(() => {
    const t = document.querySelector('section.view .vtable').ptTable, n = 40, t0 = performance.now();
    const max = t.scroll.scrollHeight;
    for (let i = 0; i < n; i++) { t.scroll.scrollTop = (i / n) * max; t.render(); }
    return (performance.now() - t0) / n;
  });
  await page.close();
  return { load, workers, heatmap, frame, scroll };
}

const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];

(async () => {
  const BASE = 128, LARGE = 4096;
  const small = prepare(BASE, 101), large = prepare(LARGE, 3071);
  const browser = await playwright.chromium.launch({ executablePath: process.env.PT_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
  const results = { small: [], large: [] };
  for (let r = 0; r < runs; r++) {
    results.small.push(await measure(browser, small));
    results.large.push(await measure(browser, large));
  }
  await browser.close();
  const rows = [['load', 'load', 'ms'], ['workers view', 'workers', 'ms'], ['heatmap view', 'heatmap', 'ms'],
                ['heatmap frame', 'frame', 'ms'], ['table scroll', 'scroll', 'ms per redraw']];
  const fs = require('fs');
  const size = (d) => fs.statSync(path.join(d, 'data.js')).size;
  console.log('PerfDisplay page, median of ' + runs + ' runs (' + BASE + ' workers = baseline)');
  console.log('data.js: ' + size(small) + ' vs ' + size(large) + ' bytes (' + (size(large) / size(small)).toFixed(1) + 'x)');
  for (const [label, key, unit] of rows) {
    const a = median(results.small.map((m) => m[key])), b = median(results.large.map((m) => m[key]));
    console.log(label.padEnd(14) + ' ' + BASE + ': ' + a.toFixed(2).padStart(8) + '  ' + LARGE + ': ' + b.toFixed(2).padStart(8) +
                ' ' + unit + '   ratio ' + (b / Math.max(a, 1e-3)).toFixed(2) + 'x');
  }
})().catch((e) => { console.error(e); process.exit(1); });
