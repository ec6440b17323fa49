import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startBoardDemo, type BoardDemo } from '../../examples/bull-board';
import type { DeferredStage } from '../../src';
import { client, closeClients, dropPrefix, isolated, waitFor } from '../helpers/redis';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(__dirname, '..', 'artifacts');
const { prefix, queueName } = isolated();

let demo: BoardDemo;
let browser: Browser;
let page: Page;
let deferred: DeferredStage[];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
  demo = await startBoardDemo({
    connection: client({ maxRetriesPerRequest: null }),
    prefix,
    queueName,
    port: 0,
    // long windows and renders: what is deferred stays deferred while the browser looks
    capacitySeconds: 300,
    renderMs: () => 600_000,
    loop: false,
  });
  // 12 stages, 3 slots: 3 dispatched, 8 deferred for capacity, 1 for idempotent
  deferred = await waitFor(async () => {
    const rows = await demo.engine.listDeferred();
    return rows.length === 9 ? rows : null;
  }, 'nine deferred stages');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const context = await browser.newContext({
    viewport: { width: 1400, height: 1000 },
    timezoneId: 'UTC',
    locale: 'en-US',
  });
  page = await context.newPage();
  mkdirSync(ARTIFACTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await demo?.close();
  await dropPrefix(client(), prefix);
  await closeClients();
});

const capacityStage = () => {
  const d = deferred.find((x) => x.class === 'capacity' && x.ref.stage === 'image');
  if (!d) throw new Error('no image stage deferred for capacity');
  return d;
};

describe('C15: a deferred stage in Redis, as Bull Board reads it', () => {
  it("is a delayed job named after the stage kind, with scope, stage, reason, class, deferrals; will run at the window's end", async () => {
    const d = capacityStage();
    const job = await demo.engine.queue.getJob(d.wakeUpJobId);
    expect(job).toBeDefined();
    expect(await job!.getState()).toBe('delayed');
    expect(job!.name).toBe('image');
    expect(job!.id).toMatch(/^book-1\/ch-\d\/sc-\d\/image@cap\.1\.0\.0\.[0-9a-z]+$/);
    expect(job!.data).toMatchObject({
      scope: d.ref.scope,
      stage: 'image',
      reason: 'no_worker_available',
      class: 'capacity',
      deferrals: 1,
    });
    // Bull Board shows "will run at" = timestamp + delay: the window's end, as listDeferred gives it
    const windowEnd = d.until;
    expect(Math.abs(job!.timestamp + (job!.opts.delay ?? 0) - windowEnd)).toBeLessThanOrEqual(20);
    const logs = await demo.engine.queue.getJobLogs(d.wakeUpJobId);
    expect(logs.logs).toHaveLength(1);
    expect(logs.logs[0]).toMatch(/deferred #1 \(capacity\): no_worker_available; wakes at /);
  });
});

describe('C15: Bull Board in Chromium', () => {
  it('lists the deferred stages under Delayed, with their reason', async () => {
    await page.goto(`${demo.url}/queue/${queueName}?status=delayed`);
    const d = capacityStage();
    await page.getByText(d.wakeUpJobId, { exact: true }).waitFor({ timeout: 15_000 });
    const body = (await page.textContent('body')) ?? '';
    expect(body).toContain('no_worker_available');
    expect(body).toContain('already_completed');
    for (const x of deferred) expect(body).toContain(x.wakeUpJobId);
    await page.screenshot({ path: join(ARTIFACTS, 'bull-board-delayed.png') });
  });

  it("opens one wake-up job: name, reason, will run at the window's end, and its log line", async () => {
    const d = capacityStage();
    await page.getByText(d.wakeUpJobId, { exact: true }).click();
    // the board routes in the page (no load event): wait for the address to change
    await page.waitForURL((url) => url.pathname.endsWith(`/${encodeURIComponent(d.wakeUpJobId)}`), {
      waitUntil: 'commit',
    });
    const card = page.locator('main');
    await card.getByText('no_worker_available').first().waitFor();
    const job = (await demo.engine.queue.getJob(d.wakeUpJobId))!;
    const due = new Date(job.timestamp + (job.opts.delay ?? 0));
    const runAt = due.toLocaleTimeString('en-US', { timeZone: 'UTC' });
    // the board prefixes the date ("12/3, ") when the time is not today, as near midnight
    const day = due.toLocaleDateString('en-US', { timeZone: 'UTC', month: 'numeric', day: 'numeric' });
    const text = (await card.textContent()) ?? '';
    expect(text).toMatch(new RegExp(`Will run at\\s*(?:${day},\\s*)?${runAt.replace(/ /g, '\\s*')}`));
    expect(text).toContain('"capacity"');
    // the job's name, shown on its own (the data has it in quotes)
    await expect(card.getByText('image', { exact: true }).count()).resolves.toBeGreaterThan(0);
    await card.getByRole('tab', { name: 'Logs', exact: true }).click();
    await card.getByText(/deferred #1 \(capacity\): no_worker_available/).waitFor({ timeout: 10_000 });
    await page.screenshot({ path: join(ARTIFACTS, 'bull-board-job.png') });
  });
});
