// Drives `baton serve` in Debian's Chromium as a person would, while a run goes:
//   node serve.mjs LINK RUN RELEASE_FILE SCREENSHOT.png
// LINK is the link `baton serve` printed (with its token). The run has a task `slow` that
// prints `started`, waits for RELEASE_FILE, prints `released`; and `gate`, after it, waiting
// for approval. Prints one JSON object of what it saw; exits non-zero at the first thing that
// is not as a person would expect.
import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';

const [link, run, release, screenshot] = process.argv.slice(2);
const base = new URL(link).origin;
const seen = {};
const timeout = 30000;

// Without the token, or with a wrong one: 401, whatever the page.
seen.unauthorized = [
  (await fetch(base + '/')).status,
  (await fetch(base + '/runs/' + run)).status,
  (await fetch(base + '/?token=0000', { redirect: 'manual' })).status,
  (await fetch(base + '/runs/' + run + '/act', { method: 'POST', body: '{}' })).status,
];

const browser = await chromium.launch({
  executablePath: process.env.BATON_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1180, height: 900 } });
  const errors = [];
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  // The link: its token becomes a cookie and the address loses it.
  await page.goto(link);
  seen.address = page.url();
  await page.waitForSelector(`tr[data-run="${run}"]`, { timeout });
  await page.click(`tr[data-run="${run}"] a`);
  await page.waitForSelector('.graph .node[data-task="slow"].run', { timeout });
  // Marked: a reload would lose the mark.
  await page.evaluate(() => { window.__notReloaded = true; });

  // The task's page: its log as it grows.
  const task = await context.newPage();
  task.on('pageerror', (e) => errors.push(String(e)));
  await task.goto(`${base}/runs/${run}/task?name=slow`);
  await task.waitForFunction(() => document.getElementById('log').textContent.includes('started'), null, { timeout });
  seen.logBefore = await task.textContent('#log');
  writeFileSync(release, '');
  await task.waitForFunction(() => document.getElementById('log').textContent.includes('released'), null, { timeout });
  seen.logAfter = await task.textContent('#log');
  await task.waitForFunction(() => document.getElementById('log-state').textContent.includes('ended'), null, { timeout });

  // The run's page turned the task green by itself.
  await page.waitForSelector('.graph .node[data-task="slow"].ok', { timeout });
  seen.greenWithoutReload = await page.evaluate(() => window.__notReloaded === true);

  // gate waits for approval: approved from the page.
  // gate waits for approval: first on the page, with its buttons.
  await page.waitForSelector('#needs-you [data-act="approve"][data-act-task="gate"]', { timeout });
  seen.needsYou = await page.textContent('#needs-you');
  // What a person sees while the run waits for them.
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  await page.click('#needs-you [data-act="approve"][data-act-task="gate"]');
  await page.waitForSelector('.graph .node[data-task="gate"].ok', { timeout });
  await page.waitForFunction(() => document.querySelector('h1 .pill').textContent.trim() === 'succeeded', null, { timeout });
  seen.stillNotReloaded = await page.evaluate(() => window.__notReloaded === true);
  seen.message = await page.textContent('#act-msg');
  seen.errors = errors;
  console.log(JSON.stringify(seen));
} catch (e) {
  console.error(String(e.stack || e));
  console.error(JSON.stringify(seen));
  process.exitCode = 1;
} finally {
  await browser.close();
}
