// Opens a report baton wrote in Debian's Chromium (driven by playwright-core), as a person
// would: refuses every request that would leave the file (the page must need nothing else),
// collects what the page's script complains of, reads the timeline's bars, clicks one and
// sees its task's details open, and takes a screenshot of the whole page.
//
//   node report.mjs REPORT.html SCREENSHOT.png
// prints one JSON object: {bars, external, errors, opened, title}.
import { chromium } from 'playwright-core';

const [report, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.BATON_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1180, height: 900 }, deviceScaleFactor: 1 });
  const external = [];
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:')) return route.continue();
    external.push(url);
    return route.abort();
  });
  await page.goto('file://' + report, { waitUntil: 'load' });
  const title = await page.title();
  const bars = await page.$$eval('.gantt .bar', (els) => els.map((el) => ({
    task: el.dataset.task, attempt: Number(el.dataset.attempt), status: el.dataset.status,
  })));
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  // A click on the last bar opens its task's details.
  let opened = null;
  const last = bars[bars.length - 1];
  if (last) {
    await page.locator('.gantt .bar').last().click();
    await page.waitForTimeout(300);
    opened = await page.evaluate(() => {
      const card = document.querySelector('details.task.target, details.task:target');
      return card ? { id: card.querySelector('.id').textContent, open: card.open } : null;
    });
  }
  console.log(JSON.stringify({ title, bars, external, errors, opened }));
} finally {
  await browser.close();
}
