/* cross_origin_checks.js -- a page of another origin cannot read the report.
 *
 * browser.test.js runs these with `--check cross-origin`, once per server. The attack: any
 * web page, or an HTML file opened from disk, holds `<script src="http://127.0.0.1:PORT/data.js">`;
 * without Cross-Origin-Resource-Policy the browser runs data.js in that page and it reads
 * window.PT_REPORT (verdict, host names, kernel names). The Host check cannot stop it: the
 * request names 127.0.0.1. Here the same attacker page is served from three other origins:
 * another loopback address (127.0.0.2: cross-site), another port of 127.0.0.1 (same-site)
 * and a file:// page; from each, PT_REPORT must stay undefined and fetch() of report.json
 * (without and with CORS) must fail. So that these checks can fail, the same page put in
 * the folder and served from the report's own origin must read the whole report, the
 * folder opened from file:// must still load its own data.js, and a link followed from
 * another origin must still open the page (a navigation is not refused).
 */
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');

/* What an attacker's page holds: the report's data.js as a script of its own. */
function attackerPage(base) {
  return '<!DOCTYPE html>\n<meta charset="utf-8">\n<title>another origin</title>\n' +
    '<script src="' + base + 'data.js"></script>\n';
}

/* Serves html at http://host:<free port>/; null where host cannot be bound here. */
function serveOn(host, html) {
  return new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(html);
    });
    server.on('error', () => resolve(null));
    server.listen(0, host, () => resolve({ server, url: 'http://' + host + ':' + server.address().port + '/' }));
  });
}

/* What the page at url can read of the report: window.PT_REPORT once data.js's <script>
 * has run or failed (goto waits for the load event), and report.json through fetch(). */
async function readFrom(page, url, base) {
  const failed = [];
  const onFail = (r) => { if (r.url() === base + 'data.js') failed.push(r.url().slice(base.length - 1) + ': ' + r.failure().errorText); };
  page.on('requestfailed', onFail);
  await page.goto(url);
  const got = await page.evaluate(async (base) => {
    const fetched = (mode) => fetch(base + 'report.json', { mode, cache: 'no-store' })
      .then((r) => r.type + ' ' + r.status, () => 'blocked');
    const report = window.PT_REPORT;
    return { report: typeof report === 'object' && report ? JSON.stringify(report) : String(report),
             noCors: await fetched('no-cors'), cors: await fetched('cors') };
  }, base);
  page.off('requestfailed', onFail);
  got.failed = failed;
  return got;
}

async function runCrossOrigin(t, browser, base, displayDir) {
  const { args, check } = t;
  const wanted = JSON.stringify(JSON.parse(fs.readFileSync(path.join(displayDir, 'report.json'), 'utf8')));
  const html = attackerPage(base);
  const page = await browser.newPage();
  const servers = [];
  try {
    /* The control: the same page from the report's own origin reads all of it. */
    fs.writeFileSync(path.join(displayDir, 'cross-origin-probe.html'), html);
    const own = await readFrom(page, base + 'cross-origin-probe.html', base);
    check(own.report === wanted && own.noCors === 'basic 200' && own.cors === 'basic 200',
      args.server + ': the attacker page served from the report\'s own origin reads window.PT_REPORT, ' +
      'equal to report.json, and fetches report.json (' + own.report.slice(0, 40) + ', ' + own.noCors + ', ' + own.cors + ')');

    const origins = [];
    for (const [host, kind] of [['127.0.0.2', 'cross-site'], ['127.0.0.1', 'same-site']]) {
      const served = await serveOn(host, html);
      if (!served) { console.log('skip ' + kind + ' page: cannot listen on ' + host + ' here'); continue; }
      servers.push(served.server);
      origins.push([served.url, kind + ', another ' + (host === '127.0.0.1' ? 'port' : 'loopback address')]);
    }
    const filePage = path.join(args.work, 'attacker.html'); /* outside the folder, as a download would be */
    fs.writeFileSync(filePage, html);
    origins.push(['file://' + filePage, 'a file:// page']);
    for (const [url, what] of origins) {
      const got = await readFrom(page, url, base);
      check(got.report === 'undefined',
        args.server + ': a page at ' + url + ' (' + what + ') including ' + base + 'data.js does not get window.PT_REPORT (' +
        got.report.slice(0, 60) + '; ' + (got.failed.join(', ') || 'no request failed') + ')');
      check(got.noCors === 'blocked' && got.cors === 'blocked',
        args.server + ': from ' + what + ', fetch() of report.json fails, without and with CORS (' + got.noCors + ', ' + got.cors + ')');
    }

    /* Still working: the report's own page, a link to it from another origin, and file://. */
    if (origins.length > 1) {
      await page.goto(origins[0][0]);
      await page.evaluate((b) => { location.href = b; }, base);
      await page.waitForURL(base);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
      check(await page.evaluate((w) => JSON.stringify(window.PT_REPORT) === w, wanted) && (await page.textContent('#verdict')).length > 0,
        args.server + ': a link followed from ' + origins[0][0] + ' opens the report (a navigation is not refused)');
    }
    await page.goto('file://' + path.join(displayDir, 'index.html'));
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
    check(await page.evaluate((w) => JSON.stringify(window.PT_REPORT) === w, wanted) && (await page.textContent('#verdict')).length > 0,
      'the folder opened from file:// still loads its own data.js and shows the verdict');
  } finally {
    for (const s of servers) s.close();
    await page.close();
  }
}

module.exports = { runCrossOrigin };
