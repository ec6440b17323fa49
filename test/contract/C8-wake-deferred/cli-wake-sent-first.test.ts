import { Worker, type Job } from 'bullmq';
import type { StageRef } from '../../../src';
import { type harness, notSent, SENT } from '../../helpers/engine';
import { cliInProcess, instrumentedHarness, wakeupsOf } from '../../helpers/metrics';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * A gap found when tried: A wake from the ops CLI (WAKE's 'e' mark:
 * the CLI's process reports nothing) was reported only by the wake-up's run when that run began
 * its stage. When another call sends the stage first (the host's scheduler sees the stage no
 * longer deferred and dispatches it), the wake-up's run answers stale, or never runs (the
 * success removes it), and `stage_deferral.wakeups` counted the wake nowhere. Now the attempt
 * that takes the stage from the CLI-woken wake-up reports it, and a run that ends without
 * dispatching (stale, cancelled, superseded) reports it when nobody did: once either way.
 */
const a: StageRef = { scope: ['r36-cli', 'ch-1'], stage: 'image' };

const setup = () => instrumentedHarness({ windows: { capacitySeconds: 300, jitter: 0 } });

/** Defers `a` once (capacity) and returns its wake-up's job id. */
async function deferA(h: ReturnType<typeof harness>): Promise<string> {
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
  expect(await h.engine.isStageDeferred(a)).toBe(true);
  const delayed = await h.engine.queue.getDelayed();
  expect(delayed).toHaveLength(1);
  return delayed[0]!.id!;
}

/** A Worker that holds each job before the engine's processor until `open()`. */
function heldWorker(h: ReturnType<typeof harness>) {
  const active: Job[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const finished: string[] = [];
  const processor = h.engine.processor;
  const worker = new Worker(
    h.queueName,
    async (job, token) => {
      active.push(job);
      await gate;
      return processor(job, token);
    },
    { connection: { ...redisOptions(), maxRetriesPerRequest: null }, prefix: h.prefix, concurrency: 1 },
  );
  worker.on('completed', (job) => finished.push(job.id!));
  worker.on('failed', (job) => finished.push(job!.id!));
  return { worker, active, open, finished };
}

/** Defers `a`, wakes it with the CLI and waits until `held` holds its promoted wake-up (before its begin). */
async function cliWokenAndHeld(h: ReturnType<typeof harness>, held: ReturnType<typeof heldWorker>): Promise<string> {
  const wakeUp = await deferA(h);
  expect((await cliInProcess(h, '--json', 'wake', '--stage', 'image')).code).toBe(0);
  await waitFor(() => held.active.length === 1, 'the promoted wake-up to be active');
  expect(held.active[0]!.id).toBe(wakeUp);
  return wakeUp;
}

/** Lets `held` run its wake-up, waits until it finished, and checks the one early wake counted. */
async function releaseAndCount(
  held: ReturnType<typeof heldWorker>,
  wakeUp: string,
  s: Pick<ReturnType<typeof setup>, 'reader' | 'woken'>,
) {
  held.open();
  await waitFor(() => held.finished.includes(wakeUp), 'the wake-up to finish');
  expect(s.woken).toEqual([{ ref: a, jobId: wakeUp, early: true }]);
  expect(await wakeupsOf(s.reader)).toEqual({ total: 1, early: 1 });
}

describe('C8: a wake from the ops CLI whose stage ends another way is counted once', () => {
  it('a CLI wake whose stage a direct dispatch sends before its wake-up runs is counted once, early, by the dispatching process', async () => {
    const { h, reader, woken, done } = setup();
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT, SENT);
      const wakeUp = await deferA(h);
      const r = await cliInProcess(h, '--json', 'wake', '--stage', 'image');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ woken: [a] });
      expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
      expect(woken).toEqual([{ ref: a, jobId: wakeUp, early: true }]);
      // the fleet's Worker then finds nothing of the stage to send and reports nothing more
      const worker = h.engine.createWorker();
      try {
        await waitFor(
          async () => (await h.engine.queue.getJobs(['wait', 'delayed', 'active', 'prioritized'])).length === 0,
          'the queue to drain',
        );
      } finally {
        await worker.close();
      }
      expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
      expect(woken).toHaveLength(1);
      expect(await wakeupsOf(reader)).toEqual({ total: 1, early: 1 });
    } finally {
      await done();
    }
  });

  it('a CLI-woken wake-up held before its begin while a direct dispatch sends its stage answers stale, and the wake is counted once', async () => {
    const s = setup();
    const { h } = s;
    const held = heldWorker(h);
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT, SENT);
      const wakeUp = await cliWokenAndHeld(h, held);
      expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
      // counted by the dispatch that took the stage from the wake-up, not again by the wake-up's run
      expect(s.woken).toHaveLength(1);
      await releaseAndCount(held, wakeUp, s);
      expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
    } finally {
      held.open();
      await held.worker.close();
      await s.done();
    }
  });

  it('a CLI-woken wake-up held before its begin while its stage is cancelled reports the wake once, by its run', async () => {
    const s = setup();
    const { h } = s;
    const held = heldWorker(h);
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT);
      const wakeUp = await cliWokenAndHeld(h, held);
      await h.engine.cancelActiveDispatch(a);
      expect(s.woken).toEqual([]);
      await releaseAndCount(held, wakeUp, s);
      expect(h.executor.callsOf(a)).toHaveLength(1);
    } finally {
      held.open();
      await held.worker.close();
      await s.done();
    }
  });

  it('a wakeDeferred in the instrumented process, then a direct dispatch that sends the stage: the wake is counted once, not again by the dispatch', async () => {
    const { h, reader, woken, done } = setup();
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT);
      const wakeUp = await deferA(h);
      expect(await h.engine.wakeDeferred({ stage: 'image' })).toEqual({ woken: [a] });
      expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
      expect(woken).toEqual([{ ref: a, jobId: wakeUp, early: true }]);
      expect(await wakeupsOf(reader)).toEqual({ total: 1, early: 1 });
    } finally {
      await done();
    }
  });
});
