#!/usr/bin/env node
/* browser.test.js -- PerfDisplay in headless Debian Chromium, driven by playwright-core.
 *
 *   node browser.test.js --server app.py|perftracker --perftracker BIN --work DIR
 *        --node-modules DIR [--python /usr/bin/python3] [--source synth|generated|diff|reports]
 *        [--workers 8 --fault-rank 5] [--traces ../shared/data/traces] [--page web/]
 *        [--check cross-origin]
 *
 * A PerfDisplay folder for a job with a known fault (fixture.py: `perftracker synth
 * --fault slow_gpu` + `perftracker analyze`, or a generated report for 4096 workers and the
 * sections synth lacks) is served by the server named and checked the way a user reads it:
 * the root-cause sentence names the right worker and function; "Evidence" lands on the
 * highlighted row; every section opens with its "how to read this"; tables sort; the
 * heatmap's culprit row is red on the canvas and marked; the hostile names
 * (<img src=x onerror=alert(1)>) render as text with no dialog and no <img>; nothing is
 * fetched from outside the folder; the page also works from file:// and without the chart
 * library. With --source diff the page is a `perftracker diff` and diff_checks.js checks it;
 * with --source reports, report_checks.js checks the reports real runs make (real traces
 * and synth jobs of 1 to 4096 ranks) at 1400 x 1000. With --check cross-origin,
 * cross_origin_checks.js checks that pages of other origins (another loopback address or
 * port, a file:// page) cannot read the served report. --page DIR puts the page files of DIR
 * (a web/ folder, e.g. of an older commit) into every folder first: how a check is shown
 * to fail on another page. Screenshots go to DIR/screenshots. Exits 77 (skip) without
 * chromium or playwright-core, 1 on any failed check.
 */
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync, spawn } = require('child_process');
const { runDiff } = require('./diff_checks.js');
const { runReports, cutOff, figuresAgree } = require('./report_checks.js');
const { runCrossOrigin } = require('./cross_origin_checks.js');

const SKIP = 77;
const LARGE_JOB = 10000; /* from here on, runLarge's checks (the page at scale) instead of run's */
const CHROMIUM = process.env.PT_CHROMIUM || '/usr/bin/chromium';
const HERE = __dirname;

function parseArgs(argv) {
  const a = { server: 'perftracker', python: '/usr/bin/python3', workers: 8, faultRank: 5, source: 'synth' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    a[key] = argv[i + 1];
  }
  a.workers = Number(a.workers);
  a.faultRank = Number(a.faultRank);
  return a;
}

const failures = [];
function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures.push(what);
}

function skip(why) {
  console.log('SKIP: ' + why);
  process.exit(SKIP);
}

function prepare(args) {
  const out = execFileSync('python3', [path.join(HERE, 'fixture.py'), 'prepare', '--work', args.work,
    '--perftracker', args.perftracker, '--source', args.source, '--workers', String(args.workers),
    '--fault-rank', String(args.faultRank)].concat(args.traces ? ['--traces', args.traces] : []),
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  const prepared = JSON.parse(out.trim().split('\n').pop());
  if (args.page) {
    const folders = prepared.facts.reports ? Object.values(prepared.facts.reports)
      : [prepared.display_dir].concat(prepared.facts.noisy_dir ? [prepared.facts.noisy_dir] : []);
    for (const dir of folders) replacePage(args.page, dir);
  }
  return prepared;
}

/* The page files of a web/ folder into a PerfDisplay folder, as the build would put them. */
function replacePage(web, dir) {
  for (const name of fs.readdirSync(web)) {
    if (name === 'index.html') fs.copyFileSync(path.join(web, name), path.join(dir, name));
    else if (/\.(js|css)$/.test(name)) fs.copyFileSync(path.join(web, name), path.join(dir, 'assets', name));
  }
}

/* Starts the server through fixture.py (which execs it) and reads the URL it prints. */
function startServer(args, displayDir) {
  return new Promise((resolve, reject) => {
    const proc = spawn('python3', [path.join(HERE, 'fixture.py'), 'serve', '--kind', args.server,
      '--display-dir', displayDir, '--perftracker', args.perftracker, '--python', args.python],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => reject(new Error('server did not start: ' + out + err)), 20000);
    proc.stderr.on('data', (d) => { err += d; });
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /(http:\/\/\S+\/)/.exec(out);
      if (m) { clearTimeout(timer); resolve({ proc, base: m[1] }); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error('server exited ' + code + ': ' + err)); });
  });
}

/* Colour of the heatmap canvas under (rank row, function column), read from its pixels. */
async function heatmapPixel(page, rank, fnName) {
  return page.evaluate(({ rank, fnName }) => {
    const hm = document.getElementById('heatmap');
    const label = hm.querySelector('.rowlabel[data-rank="' + rank + '"]');
    const col = Array.from(hm.querySelectorAll('.col')).find((c) => c.title.endsWith(': ' + fnName));
    const canvas = hm.querySelector('.scroll canvas');
    if (!label || !col || !canvas) return null;
    const lr = label.getBoundingClientRect(), cr = col.getBoundingClientRect(), kr = canvas.getBoundingClientRect();
    const dpr = canvas.width / kr.width;
    const x = Math.floor((cr.left + cr.width / 2 - kr.left) * dpr), y = Math.floor((lr.top + lr.height / 2 - kr.top) * dpr);
    return Array.from(canvas.getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3));
  }, { rank, fnName });
}
/* A kernel's name as a sentence would cite it: no "void ", no template or launch suffix. */
const kernelBase = (key) => key.split('|')[0].replace(/^void /, '').split(/[<(]/)[0].slice(0, 40);

/* The values of one column of a PD.Table, in the order the table shows them. */
async function columnValues(table, label) {
  return table.evaluate((node, label) => {
    const t = node.ptTable, col = t.columns.find((c) => c.label === label);
    return t.rows.map((r) => col.value(r));
  }, label);
}
const sorted = (v, dir) => v.every((x, i) => i === 0 || (dir > 0 ? v[i - 1] <= x : v[i - 1] >= x));

const isRed = (p) => !!p && p[0] > 150 && p[1] < 130 && p[2] < 130;
const isPale = (p) => !!p && p[0] > 200 && p[1] > 200 && p[2] > 200;

async function visit(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  const id = hash.replace(/^#\//, '').split('?')[0];
  await page.waitForSelector('section.view[data-view="' + id + '"]');
}

/* The page to test, its screenshot folder, and what it does that it must not: dialogs,
 * script errors, requests outside the folder. */
async function openPage(args, browser, base) {
  const shots = path.join(args.work, 'screenshots', args.server);
  fs.mkdirSync(shots, { recursive: true });
  const page = browser.pages()[0] || await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 900 });
  const seen = { dialogs: [], errors: [], foreign: [] };
  page.on('dialog', (d) => { seen.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') seen.errors.push(m.text()); });
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:')) seen.foreign.push(r.url()); });
  return { page, shots, seen };
}

async function run(args, browser, base, displayDir, facts) {
  const { page, shots, seen } = await openPage(args, browser, base);
  const { dialogs, errors, foreign } = seen;

  await page.goto(base);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
  await page.screenshot({ path: path.join(shots, 'overview.png'), fullPage: true });

  /* The diagnosis: verdict, then the root cause naming the worker and the function. */
  const verdict = await page.textContent('#verdict');
  check(/^Degraded/.test(verdict), 'verdict shown first: ' + verdict);
  const root = page.locator('#findings .finding.root');
  check(await root.count() === 1, 'one finding is marked as the root cause');
  const rootText = await root.locator('.summary').textContent();
  const namesRank = (text) => new RegExp('^Rank ' + facts.fault_rank + '(?![0-9])').test(text); /* "Rank 5 ...", "Rank 5's ..." */
  check(namesRank(rootText), 'root-cause sentence names the worker: ' + rootText.slice(0, 90));
  const rootWorkers = await root.locator('.facts a[href^="#/workers"]').evaluateAll((as) => as.map((a) => [a.textContent, a.title]));
  check(rootWorkers.length === 1 && rootWorkers[0][0] === 'rank ' + facts.fault_rank && rootWorkers[0][1] === facts.fault_worker,
    'root cause links to exactly that worker (' + JSON.stringify(rootWorkers) + ')');
  const fnTitle = await root.locator('.facts .mono').getAttribute('title');
  check(fnTitle === facts.fault_function, 'root cause names the function (full name on hover)');
  check(rootText.includes(kernelBase(facts.fault_function)), 'the sentence names the kernel (' + kernelBase(facts.fault_function) + ')');
  check(/≈\d+(\.\d+)?% of step time/.test(await root.locator('.facts').textContent()), 'impact on step time shown');
  const firstIsRoot = await page.evaluate(() => document.querySelector('#findings .finding').classList.contains('root'));
  check(firstIsRoot, 'root cause comes first');

  /* One click to the evidence. */
  await root.locator('a.evidence-link').click();
  await page.waitForSelector('section.view[data-view="gpu-compute"] #evidence');
  const hl = await page.$$eval('section.view tr.hl td:first-child', (tds) => tds.map((td) => td.title));
  check(hl.includes(facts.fault_function), 'evidence: the kernel row is highlighted in GPU Compute');
  check((await page.textContent('#evidence')).includes(String(facts.fault_rank)), 'evidence panel lists the worker');
  await page.screenshot({ path: path.join(shots, 'evidence.png'), fullPage: true });

  /* Every section, from the navigation. */
  const views = await page.$$eval('#nav a', (as) => as.map((a) => [a.dataset.view, a.textContent]));
  check(views.length >= 2 + facts.sections.length, 'navigation lists the views: ' + views.map((v) => v[0]).join(' '));
  for (const [id] of views) {
    await page.click('#nav a[data-view="' + id + '"]');
    await page.waitForSelector('section.view[data-view="' + id + '"]');
    const h1 = await page.textContent('section.view h1');
    const howto = await page.$('section.view details.howto');
    const needsHowto = !['overview'].includes(id);
    check(h1.length > 0 && (!needsHowto || !!howto), 'section ' + id + ' opens ("' + h1 + '")' + (needsHowto ? ' with how-to-read' : ''));
    check(await page.evaluate(() => document.querySelectorAll('img').length === 0), 'no <img> element on ' + id);
    await page.screenshot({ path: path.join(shots, 'view-' + id + '.png'), fullPage: true });
  }
  for (const section of facts.sections) {
    check(views.some((v) => v[1].startsWith(section)), 'a view for the report\'s "' + section + '"');
  }

  /* Sortable tables: major kernels by median cost, both directions. */
  await visit(page, '#/gpu-compute');
  const costHeader = page.locator('th', { hasText: 'median cost per execution (ms)' });
  const kernelTable = page.locator('section.view .vtable', { has: costHeader }).first();
  const header = kernelTable.locator('th', { hasText: 'median cost per execution (ms)' });
  const costs = () => columnValues(kernelTable, 'median cost per execution (ms)');
  await header.click();
  const desc = await costs();
  const firstShown = await kernelTable.locator('tr.data td:first-child').first().getAttribute('title');
  const firstKey = await kernelTable.evaluate((n) => n.ptTable.rows[0][0]);
  await header.click();
  const asc = await costs();
  check(desc.length > 1 && sorted(desc, -1) && sorted(asc, +1) && desc[0] > asc[0],
    'kernel table sorts by median cost, both ways (' + desc.length + ' kernels)');
  check(firstShown === firstKey, 'the first row shown is the first in sort order');
  check(await header.getAttribute('aria-sort') === 'ascending', 'sorted column is marked');

  /* Long kernel names are shortened, the full name on hover. */
  const long = await page.$$eval('section.view td span.mono', (s) => s.map((x) => [x.textContent, x.title]).filter((p) => p[1].length > 120));
  check(long.length > 0 && long.every((p) => p[0].length <= 90 && p[0].includes('…')),
    'long kernel names shortened (' + (long[0] ? long[0][0] : 'none found') + ')');

  /* XSS: the hostile kernel and Python frame render as text. */
  check(!!facts.xss_kernel && !!facts.xss_stack, 'the report carries the hostile kernel and Python frame');
  const xssCell = await page.$$eval('section.view td span.mono', (s, k) => s.filter((x) => x.title === k).map((x) => x.textContent), facts.xss_kernel);
  check(xssCell.length > 0 && xssCell[0].includes(facts.xss), 'hostile kernel name shown as text: ' + xssCell[0]);
  await visit(page, '#/python?key=' + encodeURIComponent(facts.xss_stack));
  await page.waitForSelector('#python-detail ol.stackframes li');
  const frames = await page.$$eval('#python-detail ol.stackframes li', (lis) => lis.map((li) => li.textContent));
  check(frames[frames.length - 1] === facts.xss_stack.split('|').pop() && frames[frames.length - 1].includes(facts.xss),
    'hostile Python frame shown as text in the call stack: ' + frames[frames.length - 1]);
  await page.screenshot({ path: path.join(shots, 'python-xss.png'), fullPage: true });
  if (facts.xss_in_findings) {
    await visit(page, '#/overview');
    check((await page.textContent('#findings')).includes(facts.xss), 'hostile name in a finding sentence shown as text');
    const codes = await page.$$eval('#findings .summary code', (cs) => cs.map((c) => c.textContent));
    check(codes.includes(facts.xss) && !(await page.textContent('#findings')).includes('`' + facts.xss),
      'a `quoted` hostile name in a sentence is code, as text (' + JSON.stringify(codes) + ')');
  }
  if (facts.xss_in_warnings) {
    await visit(page, '#/warnings');
    check((await page.textContent('#warnings')).includes(facts.xss), 'hostile name in a warning shown as text');
  }
  if (facts.markup_worker) {
    await visit(page, '#/workers');
    /* Whole, or shortened in the middle with the whole name on hover; never as markup. */
    const shown = await page.$$eval('section.view .vtable td', (tds, n) => tds.some((td) => (td.textContent === n || td.title === n) &&
      !td.querySelector('b')), facts.markup_worker);
    check(shown, 'a worker file name with markup is shown as text: ' + facts.markup_worker);
  }
  check(await page.evaluate(() => document.querySelectorAll('img').length === 0), 'no injected <img> anywhere');

  /* Heatmap: the culprit row is marked and red in the fault function's column. */
  await visit(page, '#/heatmap?finding=0');
  await page.waitForSelector('#heatmap .rowlabel[data-rank="' + facts.fault_rank + '"]');
  check(await page.getAttribute('#heatmap', 'data-culprits') === String(facts.fault_rank), 'heatmap marks the culprit rank');
  check(await page.$eval('#heatmap .rowlabel[data-rank="' + facts.fault_rank + '"]', (l) => l.classList.contains('culprit')), 'culprit row label highlighted');
  const colTitle = await page.$eval('#heatmap .col.hl', (c) => c.title).catch(() => null);
  check(!!colTitle && colTitle.endsWith(facts.fault_function), 'the finding\'s function column is highlighted');
  const hot = await heatmapPixel(page, facts.fault_rank, facts.fault_function);
  const normalRank = facts.fault_rank === 0 ? 1 : facts.fault_rank - 1;
  const cold = await heatmapPixel(page, normalRank, facts.fault_function);
  check(isRed(hot) && isPale(cold), 'culprit cell is red on the canvas, a normal worker\'s is pale (' + hot + ' vs ' + cold + ')');
  await page.screenshot({ path: path.join(shots, 'heatmap.png'), fullPage: true });
  await page.click('#heatmap button:has-text("Largest excess first")');
  /* Grouped by node (a large job), the culprit's node comes first, opened onto its ranks. */
  const first = await page.$eval('#heatmap .rowlabel', (l) => l.dataset.node !== undefined ? 'node ' + l.dataset.node : 'rank ' + l.dataset.rank);
  const firstRank = await page.$eval('#heatmap .rowlabel[data-rank]', (l) => Number(l.dataset.rank));
  const grouped = await page.$eval('#heatmap', (hm) => hm.ptHeatmap.grouped);
  const wantFirst = grouped ? 'node ' + facts.fault_node : 'rank ' + facts.fault_rank;
  check(first === wantFirst && firstRank === facts.fault_rank, 'ordered by excess, the culprit is the first row (' + first + ', then rank ' + firstRank + ')');

  /* A worker's steps, one click from the table. */
  await visit(page, '#/workers?rank=' + facts.fault_rank);
  await page.waitForSelector('#worker-detail h2');
  check((await page.textContent('#worker-detail h2')).startsWith('Rank ' + facts.fault_rank + ' '), 'worker detail opens from a link');
  check(await page.$$eval('#worker-detail tr.data', (r) => r.length) >= 1, 'per-step breakdown listed');
  const domRows = await page.$$eval('section.view .vtable tr.data', (r) => r.length);
  check(domRows <= 120, 'workers table renders only visible rows (' + domRows + ' in the DOM for ' + facts.workers + ' workers)');

  /* Raw traces: the link reaches the file through the server. */
  if (facts.raw_traces.length) {
    await visit(page, '#/traces');
    const href = await page.$eval('section.view td a.mono', (a) => a.href);
    const resp = await page.request.get(href);
    check(resp.status() === 200 && (await resp.text()).startsWith('perftracker raw trace'), 'raw trace link works: ' + href);
  }

  if (facts.workers <= 64) await figuresAndWidths(args, page, base, displayDir, facts, shots);

  check(dialogs.length === 0, 'no dialog opened (' + dialogs.join(', ') + ')');
  check(errors.length === 0, 'no script errors (' + errors.slice(0, 3).join(' | ') + ')');
  check(foreign.length === 0, 'nothing fetched from outside the folder (' + foreign.slice(0, 3).join(', ') + ')');

  /* Without the chart library (a build without npm): still a working page, and it says so. */
  await page.route('**/assets/echarts.min.js', (r) => r.fulfill({ status: 404, body: '' }));
  await page.goto(base + 'index.html#/heatmap?finding=0'); /* a new document, not a hash change */
  await page.waitForSelector('body[data-ready="true"]');
  check(!!(await page.$('#no-charts')), 'without the chart library the page says charts were not bundled');
  await page.waitForSelector('#heatmap .rowlabel[data-rank="' + facts.fault_rank + '"]');
  check(isRed(await heatmapPixel(page, facts.fault_rank, facts.fault_function)), 'heatmap works without the chart library');
  await page.screenshot({ path: path.join(shots, 'no-charts.png'), fullPage: true });
  await page.unroute('**/assets/echarts.min.js');

  /* From file://, as after copying the folder to a laptop and opening index.html. There
   * is no Content-Security-Policy header here, so this is also where an injected handler
   * would run: visit every view holding a hostile name and watch for a dialog. */
  const filePage = await browser.newPage();
  const fileErrors = [], fileDialogs = [];
  filePage.on('pageerror', (e) => fileErrors.push(String(e)));
  filePage.on('dialog', (d) => { fileDialogs.push(d.message()); d.dismiss().catch(() => {}); });
  const fileUrl = 'file://' + path.join(displayDir, 'index.html');
  await filePage.goto(fileUrl);
  await filePage.waitForSelector('body[data-ready="true"]');
  check(namesRank(await filePage.textContent('#findings .finding.root .summary')) && fileErrors.length === 0,
    'the page works from file:// too');
  let fileImgs = 0;
  for (const hash of ['#/gpu-compute', '#/python?key=' + encodeURIComponent(facts.xss_stack || ''), '#/warnings', '#/workers', '#/heatmap', '#/overview']) {
    if (!(await filePage.$('#nav a[data-view="' + hash.slice(2).split('?')[0] + '"]'))) continue; /* not in this report */
    await visit(filePage, hash);
    await filePage.waitForTimeout(100); /* an <img src=x> would have failed to load by now */
    fileImgs += await filePage.evaluate(() => document.querySelectorAll('img').length);
  }
  check(fileDialogs.length === 0 && fileImgs === 0, 'from file:// (no CSP), hostile names open no dialog and add no <img> (' + fileDialogs.length + ' dialogs, ' + fileImgs + ' images)');
  await filePage.close();
}

/* A hash route, drawn afresh: the view in place is marked stale and waited out (a hash
 * change is handled after the call that makes it returns); the route already shown gets
 * a parameter no view reads, so it is drawn again (at a new window width, say). */
async function reroute(page, hash) {
  await page.evaluate((h) => {
    const v = document.querySelector('section.view');
    if (v) v.dataset.stale = '1';
    location.hash = location.hash === h ? h + (h.includes('?') ? '&' : '?') + 'again=' + Date.now() : h;
  }, hash);
  await page.waitForSelector('section.view:not([data-stale])');
  await page.waitForTimeout(50); /* charts and tables fit once in the document */
}

/* Issue 37: one figure per quantity (report_checks.js figuresAgree: the Evidence median over
 * every worker, the card's ms per step its sentence's, no card for a finding that saves
 * nothing), then every view at 1400 and 900 px: nothing cut off (the Perfetto command and
 * the Hardware tables among them), the Hardware chart's axis names inside the chart. */
async function figuresAndWidths(args, page, base, displayDir, facts, shots) {
  const report = JSON.parse(fs.readFileSync(path.join(displayDir, 'report.json'), 'utf8'));
  const counts = { medians: 0, cards: 0, folded: 0 };
  await figuresAgree({ check }, page, (hash) => reroute(page, hash), args.source, report, counts);
  /* Each panel is checked either way: its median against report.json, or that a reference
   * value that is no median over every worker (a rolled-up slow GPU's) is not called one. */
  check(counts.panels >= 1, args.source + ': an Evidence panel was checked against report.json (' + counts.panels + ', ' + counts.medians + ' of them medians)');
  if (args.source === 'generated') check(counts.folded === 1, 'generated: its finding that saves nothing was checked');
  const views = await page.$$eval('#nav a', (as) => as.map((a) => a.dataset.view));
  /* The overview drawn at 1400 px, then the window made narrower: its plots follow. */
  await page.setViewportSize({ width: 1400, height: 900 });
  await reroute(page, '#/overview');
  await page.setViewportSize({ width: 900, height: 900 });
  await page.waitForTimeout(200);
  const resized = await cutOff(page);
  check(resized.length === 0, args.source + ': the overview drawn at 1400 px, the window then 900 px: nothing cut off (' + resized.slice(0, 3).join('; ') + ')');
  for (const width of [1400, 900]) {
    await page.setViewportSize({ width, height: 900 });
    const cut = [];
    for (const id of views) {
      await reroute(page, '#/' + id);
      for (const c of await cutOff(page)) cut.push(id + ': ' + c);
      if (['overview', 'workers', 'hardware', 'traces'].includes(id)) await page.screenshot({ path: path.join(shots, id + '-' + width + '.png'), fullPage: true });
      if (id === 'traces') { /* the Perfetto command: whole and in view, not behind a sideways scroll */
        const cmd = await page.evaluate(() => {
          const scroll = document.querySelector('section.view .vtable .scroll'), td = scroll.querySelector('tr.data td:last-child');
          const box = scroll.getBoundingClientRect(), r = td.getBoundingClientRect();
          return { text: td.textContent, inView: r.left >= box.left - 1 && r.right <= box.left + scroll.clientWidth + 1, whole: td.scrollWidth <= td.clientWidth };
        });
        check(/^perftracker export raw_trace\/\S+ -o \S+\.json$/.test(cmd.text) && cmd.inView && cmd.whole,
          'Raw traces at ' + width + ' px: the Perfetto command is whole and in view (' + JSON.stringify(cmd) + ')');
      }
      if (id !== 'hardware' || !(await page.evaluate(() => typeof window.echarts !== 'undefined'))) continue;
      const axes = await page.evaluate(() => {
        const box = document.querySelector('section.view .chart'), chart = box && window.echarts.getInstanceByDom(box);
        if (!chart) return [];
        const option = chart.getOption(), texts = chart.getZr().storage.getDisplayList().filter((e) => e.style && typeof e.style.text === 'string');
        return [option.xAxis[0].name, option.yAxis[0].name].filter(Boolean).map((name) => {
          const e = texts.find((t) => t.style.text === name);
          if (!e) return { name, inside: false };
          const r = e.getBoundingRect().clone();
          if (e.transform) r.applyTransform(e.transform);
          return { name, inside: r.x >= 0 && r.y >= 0 && r.x + r.width <= box.clientWidth && r.y + r.height <= box.clientHeight };
        });
      });
      check(axes.length === 2 && axes.every((a) => a.inside) && /\bms\b/.test(axes[0].name),
        'Hardware at ' + width + ' px: the chart\'s axis names, the time unit among them, lie inside the chart (' + JSON.stringify(axes) + ')');
    }
    check(cut.length === 0, args.source + ' at ' + width + ' px: nothing cut off in ' + views.length + ' views (' + cut.slice(0, 4).join('; ') + ')');
  }
  await page.setViewportSize({ width: 1400, height: 900 });
}

/* Rows of a PD.Table as drawn: each data row's cells' text, read after the next frame. */
async function shownRows(table) {
  await table.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  return table.evaluate((node) => Array.from(node.querySelectorAll('tr.data')).map((tr) =>
    Array.from(tr.querySelectorAll('td')).map((td) => ({ text: td.textContent, title: td.title, markup: !!td.querySelector('b') }))));
}
/* "982.2 ms" / "349 µs" -> ms */
const msOf = (text) => { const m = /^(-?[\d.,]+) (ms|µs)$/.exec(text); return m ? Number(m[1].replace(/,/g, '')) / (m[2] === 'µs' ? 1000 : 1) : NaN; };
const near = (shown, v) => Math.abs(shown - v) <= Math.abs(v) * 5e-4 + 1e-9;

/* A job of tens of thousands of workers: the page stays bounded and still shows every
 * worker's own numbers. The expected values come from report.json, read here, not from
 * the page: the Workers table keeps only the rows in view in the DOM, scrolled anywhere
 * it shows those ranks with their report values, sorting and filtering run over every
 * worker; the heatmap shows one row per node, a node opens onto exactly its ranks with
 * its cells its most deviating rank's; names stay text. */
async function runLarge(args, browser, base, displayDir, facts) {
  const { page, shots, seen } = await openPage(args, browser, base);
  const report = JSON.parse(fs.readFileSync(path.join(displayDir, 'report.json'), 'utf8'));
  const scale = report.scale, bounded = !!scale;
  check(bounded === !!facts.bounded, 'the report is in the ' + (bounded ? 'bounded' : 'full') + ' form');
  const parts = bounded ? scale.parts.files.map((f) => JSON.parse(fs.readFileSync(path.join(displayDir, '..', 'parts', f.file), 'utf8'))) : [];
  /* Every worker as report.json (and its parts, in the bounded form) has it, by rank. */
  const workers = bounded ? [].concat(...parts.map((p) => p.workers)) : report.workers, n = workers.length;
  const inReport = new Set((bounded ? report.workers : workers).map((w) => w.rank));
  if (bounded) {
    const t = scale.worker_table;
    check(t.rank.length === n && t.rank.every((r, i) => r === workers[i].rank && t.name[i] === workers[i].name && scale.nodes[t.node[i]].host === workers[i].host),
      'the fixture: the worker table and the parts agree (' + n + ' workers, ' + report.workers.length + ' in full detail)');
  }
  await page.goto(base);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120000 });
  check(new RegExp('^Rank ' + facts.fault_rank + '(?![0-9])').test(await page.textContent('#findings .finding.root .summary')),
    'with ' + n + ' workers the root cause names rank ' + facts.fault_rank);

  /* Workers: bounded DOM, every worker behind it. */
  await visit(page, '#/workers');
  const table = page.locator('#workers-table');
  await table.locator('tr.data').first().waitFor();
  check(await table.evaluate((node) => node.ptTable.rows.length) === n, 'the workers table holds all ' + n + ' workers');
  const rowH = await table.evaluate((node) => node.querySelector('tr.data').getBoundingClientRect().height);
  const header = await table.evaluate((node) => node.querySelector('thead').getBoundingClientRect().height);
  for (const target of [Math.floor(n / 2) + 7, n - 1, facts.fault_rank]) {
    await table.evaluate((node, top) => { node.ptTable.scroll.scrollTop = top; }, header + target * rowH);
    const rows = await shownRows(table);
    const ranks = rows.map((r) => Number(r[0].text));
    const contiguous = ranks.every((r, i) => i === 0 || r === ranks[i - 1] + 1);
    /* The bounded form has a worker's breakdown only for those in full detail ("–" else). */
    const right = rows.every((r) => { const w = workers[Number(r[0].text)]; return w && w.rank === Number(r[0].text) && r[1].title === w.name &&
      near(msOf(r[3].text), w.step_time_ms) && (inReport.has(w.rank) ? near(msOf(r[6].text), w.breakdown.compute_ms) : r[6].text === '–'); });
    check(rows.length > 0 && rows.length <= 60 && ranks.includes(target) && contiguous && right,
      'scrolled to rank ' + target + ': ' + rows.length + ' rows in the DOM (ranks ' + ranks[0] + '–' + ranks[ranks.length - 1] + '), each with its name, step time and compute from report.json');
  }
  /* Sorted by step time, longest first: over every worker, not the rows drawn. */
  await table.locator('th', { hasText: /^step time$/ }).click();
  await table.evaluate((node) => { node.ptTable.scroll.scrollTop = 0; });
  const longest = workers.map((w, i) => ({ w, i })).sort((a, b) => b.w.step_time_ms - a.w.step_time_ms || a.i - b.i).slice(0, 5).map((x) => x.w.rank);
  const top = (await shownRows(table)).slice(0, 5).map((r) => Number(r[0].text));
  check(JSON.stringify(top) === JSON.stringify(longest), 'sorted by step time, the first rows are the longest steps of all ' + n + ' (' + top + ' vs ' + longest + ')');
  /* Filtering runs over every worker. */
  const host = workers[Math.floor(n * 0.7)].host, q = host + '_';
  await table.locator('input[type=search]').fill(q);
  const want = workers.filter((w) => (w.name || '').toLowerCase().includes(q.toLowerCase())).map((w) => w.rank).sort((a, b) => a - b);
  const got = (await shownRows(table)).map((r) => Number(r[0].text)).sort((a, b) => a - b);
  check(want.length > 0 && JSON.stringify(got) === JSON.stringify(want), 'filtered by "' + q + '": exactly that node\'s ranks (' + got + ')');
  if (facts.markup_worker) {
    await table.locator('input[type=search]').fill('<b>');
    const rows = await shownRows(table);
    check(rows.length === 1 && rows[0][1].title === facts.markup_worker && !rows[0][1].markup && rows[0][1].text.includes('<b>'),
      'the worker named with markup is shown as text among ' + n + ' (' + (rows[0] ? rows[0][1].text : 'none') + ')');
  }
  if (bounded) { /* a worker not in full detail: opened, its detail comes from its part */
    const w = workers.find((x) => !inReport.has(x.rank) && x.rank > n / 3);
    await table.locator('input[type=search]').fill(w.name);
    await table.locator('tr.data').first().click();
    await page.waitForSelector('#worker-detail [data-rank="' + w.rank + '"] tr.data');
    const steps = await page.$$eval('#worker-detail tr.data', (trs) => trs.map((tr) => tr.querySelector('td:nth-child(2)').textContent));
    check(steps.length === w.steps.length && steps.every((t, i) => near(msOf(t), w.steps[i].ms)),
      'rank ' + w.rank + ' (not in report.json\'s workers) opens with its steps from its part (' + steps + ')');
  }
  await page.screenshot({ path: path.join(shots, 'large-workers.png') });

  /* Heatmap: one row per node; a node opens onto its ranks. */
  await visit(page, '#/heatmap');
  await page.waitForSelector('#heatmap .rowlabel');
  const hosts = new Map();
  for (const w of workers) { if (!hosts.has(w.host)) hosts.set(w.host, []); hosts.get(w.host).push(w.rank); }
  const grid = await page.evaluate(() => {
    const hm = document.getElementById('heatmap');
    return { rows: hm.ptHeatmap.order.length, labels: hm.querySelectorAll('.rowlabel').length,
             nodeLabels: hm.querySelectorAll('.rowlabel[data-node]').length, rankLabels: hm.querySelectorAll('.rowlabel[data-rank]').length };
  });
  check(grid.rows === hosts.size && grid.labels <= 80 && grid.nodeLabels === grid.labels && grid.rankLabels === 0,
    'the heatmap has one row per node (' + grid.rows + ' for ' + hosts.size + ' nodes), ' + grid.labels + ' labels in the DOM');
  const faultHost = workers[facts.fault_rank].host, members = hosts.get(faultHost);
  /* Each worker's heatmap row: report.json's (full form) or its part's (bounded form). */
  const hm = bounded ? { functions: report.Heatmap.functions, ranks: [].concat(...parts.map((p) => p.heatmap.ranks)),
                         values: [].concat(...parts.map((p) => p.heatmap.values)) } : report.Heatmap;
  const index = new Map(hm.ranks.map((r, i) => [r, i]));
  const fnIndex = hm.functions.findIndex((f) => f.name === facts.fault_function);
  const nodeLabel = '#heatmap .rowlabel[data-node="' + faultHost + '"]';
  await page.evaluate((host) => { const h = document.getElementById('heatmap').ptHeatmap; h.scrollToIndex(h.order.findIndex((r) => r.name === host)); }, faultHost);
  await page.click(nodeLabel);
  await page.waitForSelector('#heatmap .rowlabel[data-rank]');
  if (bounded) await page.waitForFunction((host) => document.getElementById('heatmap').ptHeatmap.nodes.find((x) => x.name === host).loaded, faultHost);
  const opened = await page.evaluate((host) => {
    const hm = document.getElementById('heatmap'), h = hm.ptHeatmap, at = h.order.findIndex((r) => r.name === host);
    const under = [];
    for (let i = at + 1; i < h.order.length && h.order[i].kind === 'rank'; i++) under.push(h.order[i].rank);
    return { under, shown: Array.from(hm.querySelectorAll('.rowlabel[data-rank]')).map((l) => Number(l.dataset.rank)),
             values: h.order[at].values, memberValues: h.order[at].members.map((r) => h.rowValues(r, 'values')), expanded: hm.querySelector('.rowlabel[data-node="' + host + '"]').getAttribute('aria-expanded') };
  }, faultHost);
  check(JSON.stringify(opened.under) === JSON.stringify(members) && members.every((r) => opened.shown.includes(r)) && opened.expanded === 'true',
    'node ' + faultHost + ' opens onto exactly its ranks (' + opened.under + ')');
  const mostDeviating = hm.functions.map((_, j) => members.reduce((best, r) => {
    const v = hm.values[index.get(r)][j];
    return best === null || Math.abs(v) > Math.abs(best) ? v : best;
  }, null));
  check(JSON.stringify(opened.values) === JSON.stringify(mostDeviating), 'each node cell is its most deviating rank\'s value in ' + (bounded ? 'the parts' : 'report.json'));
  check(JSON.stringify(opened.memberValues) === JSON.stringify(members.map((r) => hm.values[index.get(r)])),
    'its ranks\' rows hold their own values' + (bounded ? ', loaded from the part' : ''));
  const nodePixel = await page.evaluate(({ host, fnName }) => {
    const hm = document.getElementById('heatmap'), label = hm.querySelector('.rowlabel[data-node="' + host + '"]');
    const col = Array.from(hm.querySelectorAll('.col')).find((c) => c.title.endsWith(': ' + fnName)), canvas = hm.querySelector('.scroll canvas');
    const lr = label.getBoundingClientRect(), cr = col.getBoundingClientRect(), kr = canvas.getBoundingClientRect(), dpr = canvas.width / kr.width;
    return Array.from(canvas.getContext('2d').getImageData(Math.floor((cr.left + cr.width / 2 - kr.left) * dpr), Math.floor((lr.top + lr.height / 2 - kr.top) * dpr), 1, 1).data.slice(0, 3));
  }, { host: faultHost, fnName: facts.fault_function });
  check(fnIndex >= 0 && isRed(nodePixel) && isRed(await heatmapPixel(page, facts.fault_rank, facts.fault_function)),
    'the culprit\'s node row and its own row are red in the fault function (' + nodePixel + ')');
  const xssCol = await page.$$eval('#heatmap .col', (cs, x) => cs.filter((c) => c.textContent.includes(x)).length, facts.xss);
  check(xssCol > 0, 'hostile function names are heatmap column labels as text');
  await page.screenshot({ path: path.join(shots, 'large-heatmap.png'), fullPage: true });
  await page.click(nodeLabel);
  check(await page.$$eval('#heatmap .rowlabel[data-rank]', (l) => l.length) === 0, 'a second click closes the node');

  /* The step timeline: bounded too. */
  await visit(page, '#/timeline');
  await page.waitForSelector('#timeline .rowlabel');
  const tl = await page.evaluate(() => ({ labels: document.querySelectorAll('#timeline .rowlabel').length, rows: document.getElementById('timeline').ptTimeline.rows.length }));
  const withSteps = report.workers.filter((w) => (w.steps || []).length).length;
  check(tl.rows === withSteps && tl.labels <= 100, 'the step timeline holds ' + tl.rows + ' ranks with ' + tl.labels + ' labels in the DOM');

  if (bounded) { /* a damaged table is not used; a part is only a plain file name in the parts folder */
    const refused = await page.evaluate(async () => {
      const s = window.PT_REPORT.scale, bad = Object.assign({}, s, { worker_table: Object.assign({}, s.worker_table, { name: ['x'] }) });
      const outside = Object.assign({}, s, { parts: { folder: 'parts', files: [{ file: '../../data.json', ranks: [0, 1 << 30] }] } });
      const loaded = await PD.loadPart(outside, 0).then(() => 'loaded', (e) => e.message);
      return { table: PD.boundedScale({ scale: bad }), loaded, scripts: Array.from(document.scripts).map((x) => x.getAttribute('src')).filter((x) => x && x.includes('..')) };
    });
    check(refused.table === null && /names no part/.test(refused.loaded) && refused.scripts.length === 0,
      'a worker table with columns of different lengths is refused, a part named "../../data.json" is not loaded (' + refused.loaded + ')');
  }
  check(await page.evaluate(() => document.querySelectorAll('img').length === 0), 'no injected <img>');
  check(seen.dialogs.length === 0 && seen.errors.length === 0, 'no dialog and no script error (' + seen.errors.slice(0, 2).join(' | ') + ')');
}

/* A hang finding shows its ranks side by side: role, group, call number, call, state. */
async function runHang(args, browser, base, facts) {
  const { page, shots } = await openPage(args, browser, base);
  await page.goto(base);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
  await page.screenshot({ path: path.join(shots, 'hang-overview.png'), fullPage: true });
  check(/^Hang/.test(await page.textContent('#verdict')), 'the verdict says hang');
  const root = page.locator('#findings .finding.root');
  check(await root.count() === 1, 'one hang finding is the root cause');
  const rows = await root.locator('.hang-ranks tbody tr').evaluateAll((trs) =>
    trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent)).filter((r) => r.length >= 7));
  check(rows.length === args.workers, 'every rank has its row in the finding (' + rows.length + ')');
  const odd = rows.find((r) => r[0] === String(facts.fault_rank));
  check(!!odd && odd[1] === 'differs' && odd[2] === facts.hang_group && odd[3] === String(facts.hang_seq) &&
        /^broadcast \(\d+ × Float\)$/.test(odd[4]), 'the odd rank\'s row: ' + JSON.stringify(odd));
  const other = rows.find((r) => r[0] !== String(facts.fault_rank));
  check(!!other && other[1] === 'agrees' && other[3] === String(facts.hang_seq) && /^allreduce /.test(other[4]),
    'another rank\'s row, side by side: ' + JSON.stringify(other));
  const heading = await root.locator('.hang-ranks p').textContent();
  check(heading.includes('group ' + facts.hang_group) && heading.includes('call #' + facts.hang_seq), 'the kind, group and call above the rows: ' + heading);
  await root.locator('a.evidence-link').click();
  await page.waitForSelector('section.view[data-view="workers"] #evidence .hang-ranks');
  check(true, 'the evidence view shows the ranks side by side too');
  await page.screenshot({ path: path.join(shots, 'hang-evidence.png'), fullPage: true });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(CHROMIUM)) skip(CHROMIUM + ' not found (scripts/install-deps.sh installs chromium)');
  let playwright;
  try {
    playwright = require(path.join(path.resolve(args.nodeModules), 'playwright-core'));
  } catch (e) {
    skip('playwright-core is not installed in ' + args.nodeModules + ' (the display.npm_ci test installs it; was the npm registry reachable?)');
  }
  if (args.server === 'app.py' && !fs.existsSync(args.python)) skip(args.python + ' not found');
  fs.mkdirSync(args.work, { recursive: true });
  const { display_dir: displayDir, facts } = prepare(args);
  const { proc, base } = await startServer(args, displayDir);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'pt-chromium-'));
  let browser;
  try {
    browser = await playwright.chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM, headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
             '--disable-background-networking', '--disable-component-update', '--disable-sync',
             '--allow-file-access-from-files'],
      timeout: 60000
    });
    browser.setDefaultTimeout(30000);
    if (args.check === 'cross-origin') await runCrossOrigin({ args, check }, browser, base, displayDir);
    else if (args.source === 'diff') await runDiff({ args, check, visit, openPage }, browser, base, displayDir, facts);
    else if (args.source === 'hang') await runHang(args, browser, base, facts);
    else if (args.source === 'reports') await runReports({ args, check, visit }, browser, base, displayDir, facts);
    else if (args.workers >= LARGE_JOB) await runLarge(args, browser, base, displayDir, facts);
    else await run(args, browser, base, displayDir, facts);
  } catch (e) {
    check(false, 'browser test crashed: ' + (e && e.stack || e));
  } finally {
    if (browser) await browser.close().catch(() => {});
    proc.kill('SIGTERM');
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(failures.length + ' failure(s); screenshots in ' + path.join(args.work, 'screenshots'));
  process.exit(failures.length ? 1 : 0);
}

main();
