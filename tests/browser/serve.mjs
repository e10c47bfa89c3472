// Drives `baton serve` in Debian's Chromium as a person would, while a run goes:
//   node serve.mjs LINK RUN RELEASE_FILE SCREENSHOT.png OTHER_LINK
// LINK is the link `baton serve` printed (with its token); OTHER_LINK another dashboard's, on
// another port of the same host. The run has a task `slow` that
// prints `started`, waits for RELEASE_FILE, prints `released`; and `gate`, after it, waiting
// for approval. Prints one JSON object of what it saw; exits non-zero at the first thing that
// is not as a person would expect.
import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

const [link, run, release, screenshot, otherLink] = process.argv.slice(2);
// The dashboard's pages are under a path of its own: `http://HOST:PORT/3f9c…`.
const url = new URL(link);
const base = url.origin + url.pathname.replace(/\/$/, '');
const token = url.searchParams.get('token');
const seen = {};
const timeout = 30000;

// Another web server on the same host, as a dev server an agent started would be: what
// cookies does the browser send it?
const cookiesSent = [];
const elsewhere = createServer((req, res) => {
  cookiesSent.push(req.headers.cookie || '');
  res.end('<html><body>another server</body></html>');
});
await new Promise((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
const elsewhereUrl = `http://127.0.0.1:${elsewhere.address().port}`;

// What a request from outside the page can make the dashboard do with the token (a script,
// or a leaked token): only what the page's buttons do, and nothing is an option.
const bearer = { Authorization: `Bearer ${token}` };
// The act key, as a page has it.
const runPage = await (await fetch(`${base}/runs/${run}`, { headers: bearer })).text();
const actKey = /"act_key":"([0-9a-f]+)"/.exec(runPage)[1];
seen.injection = {
  // A task that is an option, and a run that is one: refused, not run.
  retryOption: (await fetch(`${base}/runs/${run}/act`, {
    method: 'POST', headers: { ...bearer, 'X-Baton-Token': actKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ action: 'retry', task: '--raise-budget=100000' }),
  })).status,
  eventsOption: (await fetch(`${base}/runs/--help/events`, { headers: bearer })).status,
  logOption: (await fetch(`${base}/runs/${run}/log?name=--help`, { headers: bearer })).status,
  // Outside the dashboard's path: nothing there.
  outside: (await fetch(`${url.origin}/runs/${run}`, { headers: bearer })).status,
};
// A bounded number of streams: the one past the limit is refused, not a process more.
const opened = [];
const aborts = new AbortController();
for (let i = 0; i < 17; i++) {
  const r = await fetch(`${base}/runs/${run}/events`, { headers: bearer, signal: aborts.signal });
  opened.push(r.status);
}
seen.streams = opened;
aborts.abort();
// Closed, they are given back: a stream opens again.
for (let i = 0; ; i++) {
  const probe = new AbortController();
  const r = await fetch(`${base}/runs/${run}/events`, { headers: bearer, signal: probe.signal });
  probe.abort();
  if (r.status === 200) break;
  if (i > 100) throw new Error(`streams not given back: ${r.status}`);
  await new Promise((resolve) => setTimeout(resolve, 100));
}

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
  // The cookie goes to this dashboard's pages only: not to another server on the host.
  const other = await context.newPage();
  await other.goto(elsewhereUrl + '/');
  await other.goto(`${elsewhereUrl}/runs/${run}`);
  seen.cookiesElsewhere = cookiesSent;
  // A second dashboard, logged into in the same browser, and this one still works.
  if (otherLink) {
    await other.goto(otherLink);
    seen.otherDashboard = (await other.textContent('h1')) || '';
    const again = await page.goto(base + '/');
    seen.firstAfterSecond = again.status();
  }
  await other.close();
  await page.goto(link);
  await page.waitForSelector(`tr[data-run="${run}"]`, { timeout });
  await page.click(`tr[data-run="${run}"] a`);
  await page.waitForSelector('.graph .node[data-task="slow"].run', { timeout });
  // Marked: a reload would lose the mark.
  await page.evaluate(() => { window.__notReloaded = true; });

  // The task's page: its log as it grows.
  const task = await context.newPage();
  task.on('pageerror', (e) => errors.push(String(e)));
  await task.goto(`${base}/runs/${run}/task?name=slow`);
  seen.tokenInPages = [(await page.content()).includes(token), (await task.content()).includes(token)];
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
  // The list of runs says so too: the run goes on, but it waits for a person.
  const list = await context.newPage();
  await list.goto(base + '/');
  seen.listState = (await list.textContent(`tr[data-run="${run}"] .pill`)).trim();
  await list.close();
  // What a person sees while the run waits for them.
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  await page.click('#needs-you [data-act="approve"][data-act-task="gate"]');
  await page.waitForSelector('.graph .node[data-task="gate"].ok', { timeout });
  await page.waitForFunction(() => document.querySelector('h1 .pill').textContent.trim() === 'succeeded', null, { timeout });
  seen.stillNotReloaded = await page.evaluate(() => window.__notReloaded === true);
  seen.message = await page.textContent('#act-msg');
  // Back to the list of runs, by the page's own link.
  await page.click('nav.top a');
  await page.waitForSelector(`tr[data-run="${run}"]`, { timeout });
  seen.backToRuns = new URL(page.url()).pathname === new URL(base).pathname + '/';
  seen.errors = errors;
  console.log(JSON.stringify(seen));
} catch (e) {
  console.error(String(e.stack || e));
  console.error(JSON.stringify(seen));
  process.exitCode = 1;
} finally {
  await browser.close();
  elsewhere.close();
}
