import { createDispatchEngine } from '../../../src';
import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { isolated, waitFor } from '../../helpers/redis';
import { PrivateRedis } from '../../helpers/private-redis';
import type { StageRef } from '../../../src';
import { watch, queued } from '../../helpers/members';
import { FREE, stageView } from '../../helpers/observe';

/** Paths that held up when tried (these pass). */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C10: clears beside cancels, retries and held jobs', () => {
  it('two clears at once: one counts the deferral, the stage is dispatched once', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const { done } = watch(h.engine.createWorker());
    const [a, b] = await Promise.all([h.engine.clearDeferrals(['book-1']), h.engine.clearDeferrals(['book-1'])]);
    expect(a + b).toBe(1);
    await waitFor(() => done.length === 1, 'woken');
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(h.executor.calls).toHaveLength(2);
    // nothing holds the stage: a dispatch now asks the executor
    expect(await stageView(h.engine, image)).toEqual(FREE);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
  });

  it('a clear racing a cancel: either cancelled (no dispatch) or woken once; nothing left behind', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const { done } = watch(h.engine.createWorker());
    await Promise.all([h.engine.clearDeferrals(['book-1']), h.engine.cancelActiveDispatch(image)]);
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(h.executor.calls.length).toBeLessThanOrEqual(2);
    expect(done.length).toBeLessThanOrEqual(1);
    expect(await stageView(h.engine, image)).toEqual(FREE);
    // nothing holds the stage: an enqueue adds its job, which asks the executor
    const calls = h.executor.calls.length;
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    await waitFor(() => h.executor.calls.length === calls + 1, 'the enqueued job to run');
  });

  it('clear leaves a wake-up in its retry backoff alone (not deferred, counted 0)', async () => {
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    h.executor.script(image, notSent('no_worker_available'), new Error('down'));
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'in backoff');
    expect(await h.engine.clearDeferrals(['book-1'])).toBe(0);
    expect(await h.engine.queue.getJobCounts('delayed')).toMatchObject({ delayed: 1 });
  });

  it('a held job (in its backoff) removed by hand: enqueue is not blocked, its licence is dropped', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } } });
    h.executor.script(image, new Error('down'), SENT);
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed, done } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'in backoff, holding the stage');
    expect(await stageView(h.engine, image)).toEqual({ deferred: false, listed: undefined, jobs: [jobId] });
    expect(await h.engine.enqueue(image, {})).toEqual({ added: false, reason: 'pending', jobId, payloadTaken: false });
    await (await h.engine.queue.getJob(jobId!))!.remove(); // Bull Board: Remove
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    await waitFor(() => done.length === 1, 'dispatched');
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(await stageView(h.engine, image)).toEqual(FREE);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });

  it("buildId '' reaches the executor as '' after a wake-up", async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {}, { buildId: '' });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'woken');
    expect(h.executor.calls.map((c) => c.buildId)).toEqual(['', '']);
  });

  it('fencing tokens strictly increase (as numbers and as decimal strings) across two engines', async () => {
    const a = harness();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    for (let i = 0; i < 50; i++)
      await Promise.all([a.engine.dispatchStage(image, {}), b.engine.dispatchStage(image, {})]);
    const tokens = [...a.executor.calls, ...b.executor.calls].map((c) => c.fencingToken).sort((x, y) => x - y);
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
      expect(Number.isSafeInteger(tokens[i]!)).toBe(true);
      expect(String(tokens[i]).length).toBe(String(tokens[i - 1]).length);
    }
  });

  it('waitUntilReady while Redis is down resolves once it is up (the failure is not cached)', async () => {
    // a private server, stopped: its port is known and nothing answers on it until the restart
    const server = await PrivateRedis.start();
    await server.kill9();
    // not the harness: this engine's connection must point at the stopped server
    const engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port: server.port },
      ...isolated(),
      executor: async () => SENT,
    });
    let refused = 0;
    engine.queue.on('error', () => (refused += 1));
    let ready = false;
    const p = engine.waitUntilReady().then(() => (ready = true));
    try {
      await waitFor(() => refused >= 2, 'the engine tried to connect and was refused twice');
      expect(ready).toBe(false);
      await server.restart();
      await p;
      expect(ready).toBe(true);
    } finally {
      await engine.close();
      await server.stop();
    }
  });
});
