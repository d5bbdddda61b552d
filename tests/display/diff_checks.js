/* diff_checks.js -- the diff page (`perftracker diff`, web/diff.js) in the browser, the
 * way a user reads it. browser.test.js runs these for `--source diff` (fixture.py's
 * prepare_diff: a healthy synth job against the same job with a slow GPU on one rank and
 * hostile names): the verdict names the rank and the kernel from synth's answer key; the
 * class table names the rank; every view opens; the changed-functions table holds the
 * kernel with the rank and sorts; the hostile names, added in AFTER, render as text (no
 * dialog, no <img>, also from file://); nothing is fetched from outside the folder.
 * Issue 37: whether a change counts agrees with its threshold, or the page says why not
 * (the step time's steps-apart rule), on this diff and on a noisy one (fixture.py
 * prepare_noisy_diff) whose step change counts within its threshold; a finding that saves
 * nothing has no card; both pages at 1400 and 900 px cut nothing off.
 */
'use strict';
const path = require('path');
const { cutOff } = require('./report_checks.js');

/* A kernel's name as a sentence cites it: no "void ", no template or launch suffix. */
const kernelBase = (key) => key.split('|')[0].replace(/^void /, '').split(/[<(]/)[0].slice(0, 40);

async function tableRows(page) {
  return page.$eval('section.view .vtable', (n) => n.ptTable.rows.map((r) => ({ name: r.name, ranks: (r.ranks || []).map((x) => x.rank), delta: r.delta_ms })));
}

/* Each row of the class table: "counts" as diff.json's significant; counting while within
 * the threshold only for the step time, with the page saying its steps lie apart. */
async function significanceAgrees(page, diff, check, what) {
  const rows = await page.$$eval('#diff-classes tbody tr', (trs) => trs.map((tr) => Array.from(tr.children).map((td) => td.textContent)));
  const heads = await page.$$eval('#diff-classes thead th', (ths) => ths.map((th) => th.textContent));
  const at = heads.indexOf('counts'), said = await page.$eval('#step-significance', (p) => p.textContent).catch(() => '');
  const changes = [diff.step_time].concat(diff.classes);
  let ok = at >= 0 && rows.length === changes.length, why = [];
  rows.forEach((cells, i) => {
    const c = changes[i], counts = at >= 0 && /^yes/.test(cells[at]), beyond = Math.abs(c.delta_ms) > c.threshold_ms;
    const explained = beyond || (i === 0 && /within the ±[\d.,]+ (ms|µs) noise threshold, but every profiled step/.test(said));
    /* diff.json's own reason: beyond noise exactly when past the threshold, steps apart otherwise */
    const reason = c.significant ? (beyond ? 'noise' : 'steps_apart') : null;
    if (counts !== !!c.significant || (counts && !explained) || (!counts && beyond) || c.counted_by !== reason) {
      ok = false; why.push(cells[0] + ': ' + cells.join(' | ') + ' (counted_by ' + c.counted_by + ')');
    }
  });
  const st = diff.step_time;
  const sentence = st.significant ? /^The step time's change counts/.test(said) : /^The step time's change does not count/.test(said);
  check(ok && sentence, what + ': each change counts as diff.json says, and beside a larger threshold only with its reason (' +
    (said || 'no sentence says why') + (why.length ? '; ' + why.join('; ') : '') + ')');
}

async function runDiff(t, browser, base, displayDir, facts) {
  const { args, check, visit } = t;
  const { page, shots, seen } = await t.openPage(args, browser, base);
  const { dialogs, errors, foreign } = seen;

  await page.goto(base);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
  await page.screenshot({ path: path.join(shots, 'diff-overview.png'), fullPage: true });
  check(/diff/i.test(await page.title()), 'the page says it is a diff: ' + await page.title());
  const verdict = await page.textContent('#diff-verdict');
  check(verdict.startsWith('AFTER is ') && verdict.includes('slower'), 'verdict first: ' + verdict.slice(0, 80));
  check(verdict.includes('Rank ' + facts.fault_rank + ':') && verdict.includes(kernelBase(facts.fault_function)),
    'verdict names rank ' + facts.fault_rank + ' and ' + kernelBase(facts.fault_function));
  check((await page.textContent('#verdict-badge')).trim() === 'slower', 'badge says slower');
  const compute = await page.$$eval('#diff-classes tr', (rows) => rows.map((r) => r.textContent).find((x) => x.startsWith('GPU compute')) || '');
  check(compute.includes('rank ' + facts.fault_rank + ' +'), 'class table: rank ' + facts.fault_rank + '\'s compute stands out (' + compute + ')');
  const comm = await page.$eval('#diff-classes', (tb) => Array.from(tb.querySelectorAll('tr')).find((r) => r.textContent.startsWith('communication')).className);
  check(comm === 'worse', 'class table: the median worker\'s communication grew (row marked ' + comm + ')');
  const diff = JSON.parse(require('fs').readFileSync(path.join(displayDir, 'diff.json'), 'utf8'));
  await significanceAgrees(page, diff, check, 'the diff');
  const topTitles = await page.$$eval('#top-changes li span.mono', (s) => s.map((x) => x.title));
  check(topTitles.includes(facts.fault_function), 'the kernel is among the largest changes (full name on hover)');

  const views = await page.$$eval('#nav a', (as) => as.map((a) => a.dataset.view));
  check(['overview', 'functions', 'added', 'removed', 'findings', 'notes'].every((v) => views.includes(v)), 'navigation: ' + views.join(' '));
  for (const id of views) {
    await page.click('#nav a[data-view="' + id + '"]');
    await page.waitForSelector('section.view[data-view="' + id + '"]');
    const h1 = await page.textContent('section.view h1');
    check(h1.length > 0, 'view ' + id + ' opens ("' + h1 + '")');
    check(await page.evaluate(() => document.querySelectorAll('img').length === 0), 'no <img> element on ' + id);
    await page.screenshot({ path: path.join(shots, 'diff-' + id + '.png'), fullPage: true });
  }

  await visit(page, '#/functions');
  const rows = await tableRows(page);
  const kernel = rows.find((r) => r.name === facts.fault_function);
  check(!!kernel && kernel.ranks.includes(facts.fault_rank), 'changed functions: the kernel, with rank ' + facts.fault_rank);
  const header = page.locator('section.view th', { hasText: /^change$/ });
  await header.click(); /* numeric columns sort largest first, then the other way */
  const desc = (await tableRows(page)).map((r) => r.delta);
  await header.click();
  const asc = (await tableRows(page)).map((r) => r.delta);
  check(asc.length > 1 && asc.every((v, i) => i === 0 || asc[i - 1] <= v) && desc.every((v, i) => i === 0 || desc[i - 1] >= v) &&
    desc[0] > asc[0], 'changed functions sort by change, both ways (' + desc.length + ' rows)');

  await visit(page, '#/added');
  check(!!facts.xss_kernel && !!facts.xss_stack, 'the hostile kernel and Python frame are added functions in the diff');
  const shown = await page.$$eval('section.view td span.mono', (s) => s.map((x) => [x.textContent, x.title]));
  const xssKernel = shown.find((p) => p[1] === facts.xss_kernel);
  check(!!xssKernel && xssKernel[0].includes(facts.xss), 'hostile kernel name shown as text: ' + (xssKernel || [''])[0]);
  check(shown.some((p) => p[1] === facts.xss_stack && p[0].includes(facts.xss)), 'hostile Python frame shown as text');
  await page.screenshot({ path: path.join(shots, 'diff-added-xss.png'), fullPage: true });
  await visit(page, '#/removed');
  check((await page.$$eval('section.view td span.mono', (s) => s.map((x) => x.title))).includes(facts.renamed_kernel),
    'the renamed kernel\'s old name is listed as removed');
  await visit(page, '#/findings');
  check((await page.textContent('#findings-new')).includes('Rank ' + facts.fault_rank), 'findings: AFTER\'s diagnosis names the rank');
  const cardImpacts = await page.$$eval('#findings-new .finding .label, #findings-resolved .finding .label, #findings-persisting .finding .label', (ls) => ls.map((l) => l.textContent));
  check(cardImpacts.every((l) => !/impact ≈0%/.test(l)), 'findings: no card for a finding that saves nothing (' + cardImpacts.join(' | ') + ')');

  /* The noisy diff: its step time counts within its threshold, and the page says why. */
  const noisy = JSON.parse(require('fs').readFileSync(path.join(facts.noisy_dir, 'diff.json'), 'utf8'));
  const st = noisy.step_time;
  check(st.significant && Math.abs(st.delta_ms) <= st.threshold_ms,
    'the fixture: the noisy diff\'s step change counts within its threshold (' + st.delta_ms + ' ms, ±' + st.threshold_ms + ' ms)');
  const noisyPage = await browser.newPage();
  await noisyPage.setViewportSize({ width: 1400, height: 900 });
  await noisyPage.goto('file://' + path.join(facts.noisy_dir, 'index.html'));
  await noisyPage.waitForSelector('body[data-ready="true"]');
  await significanceAgrees(noisyPage, noisy, check, 'the noisy diff');
  await noisyPage.screenshot({ path: path.join(shots, 'diff-noisy-overview.png'), fullPage: true });

  /* At 1400 and 900 px: nothing cut off in any view. */
  for (const width of [1400, 900]) {
    await noisyPage.setViewportSize({ width, height: 900 });
    await noisyPage.goto('file://' + path.join(displayDir, 'index.html'));
    await noisyPage.waitForSelector('body[data-ready="true"]');
    const cut = [];
    for (const id of views) {
      await visit(noisyPage, '#/' + id);
      for (const c of await cutOff(noisyPage)) cut.push(id + ': ' + c);
      if (id === 'overview' || id === 'functions') await noisyPage.screenshot({ path: path.join(shots, 'diff-' + id + '-' + width + '.png'), fullPage: true });
    }
    check(cut.length === 0, 'the diff at ' + width + ' px: nothing cut off in ' + views.length + ' views (' + cut.slice(0, 4).join('; ') + ')');
  }
  await noisyPage.close();

  check(dialogs.length === 0, 'no dialog opened (' + dialogs.join(', ') + ')');
  check(errors.length === 0, 'no script errors (' + errors.slice(0, 3).join(' | ') + ')');
  check(foreign.length === 0, 'nothing fetched from outside the folder (' + foreign.slice(0, 3).join(', ') + ')');
  const resp = await page.request.get(base + 'diff.json');
  check(resp.status() === 200 && (await resp.json()).diff_version === 1, 'diff.json is served beside the page');

  /* From file:// (no Content-Security-Policy): the hostile names still add nothing. */
  const filePage = await browser.newPage();
  const fileDialogs = [];
  filePage.on('dialog', (d) => { fileDialogs.push(d.message()); d.dismiss().catch(() => {}); });
  await filePage.goto('file://' + path.join(displayDir, 'index.html'));
  await filePage.waitForSelector('body[data-ready="true"]');
  check((await filePage.textContent('#diff-verdict')).startsWith('AFTER is '), 'the diff page works from file:// too');
  let imgs = 0;
  for (const hash of ['#/added', '#/removed', '#/functions', '#/overview']) {
    await visit(filePage, hash);
    await filePage.waitForTimeout(100); /* an <img src=x> would have failed to load by now */
    imgs += await filePage.evaluate(() => document.querySelectorAll('img').length);
  }
  check(fileDialogs.length === 0 && imgs === 0, 'from file://, hostile names open no dialog and add no <img>');
  await filePage.close();
}

module.exports = { runDiff };
