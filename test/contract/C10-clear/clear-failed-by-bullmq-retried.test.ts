import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { fetchBy, holdPromotion, stalledCheck, watch } from '../../helpers/jobs';
import { failedRecordsOf } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/**
 * A clear marks wake-up W and promotes it (its record, CLEAR, held). W is fetched and
 * its worker dies before the engine's begin (fetchBy, then the stalled check hands it on), so the
 * next Worker start passes `maxStartedAttempts` (1): BullMQ fails W without running the
 * processor (the engine's listener records it: `W` -> `W?`, marker untouched). An operator then
 * presses Retry in Bull Board before the clear's CLEAR: the run is a retry by hand, which skips
 * the self-clear (`not retried`) yet deletes the marker and takes `W!`. CLEAR then finds neither
 * W's marker nor its bare licence, and the pending count is 0: the clear that ended this
 * deferral counts nothing. Without the Retry, CLEAR counts it (1).
 */
const a: StageRef = { scope: ['r45-started', 'ch-1'], stage: 'image' };

it.each([
  ['no retry before CLEAR', false],
  ["an operator's Retry before CLEAR", true],
])(
  'C10: a marked wake-up BullMQ failed by maxStartedAttempts before its begin, %s: the clear counts its deferral once',
  async (_what, retry) => {
    const h = harness({ windows: { capacitySeconds: 300, idempotentSeconds: 300, jitter: 0 } });
    h.executor.script(a, notSent('no_worker_available'));
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
    const [d] = await h.engine.listDeferred(a.scope);
    const wakeUp = d!.wakeUpJobId;
    const J = `${h.prefix}:${h.queueName}:${wakeUp}`;
    const { go, restore } = holdPromotion(h.engine.queue, wakeUp);
    const clearing = h.engine.clearDeferrals(['r45-started']);
    let worker: ReturnType<typeof h.engine.createWorker> | undefined;
    try {
      await waitFor(async () => (await h.engine.queue.getJobState(wakeUp)) === 'waiting', 'the clear to promote W');
      // a worker takes W and dies before its begin
      await fetchBy(h, 'dead-worker', 200);
      await h.redis.del(`${J}:lock`);
      await stalledCheck(h, h.redis, J, 0);
      worker = h.engine.createWorker({ maxStartedAttempts: 1 });
      const { failed, done } = watch(worker);
      await waitFor(() => failed.some((f) => f.id === wakeUp), 'BullMQ to fail W (started too often)', 15_000);
      // a sync point, no more: the engine's listener has recorded W's failure (nothing a user
      // sees tells that moment; read through the named internal helper)
      await waitFor(
        async () => (await failedRecordsOf(h.redis, h, a)).includes(wakeUp),
        "the engine's listener to record W's failure",
      );
      expect(h.executor.callsFor(a)).toBe(1);
      if (retry) {
        // (its started count reset, or the limit would fail it again at once)
        await (await h.engine.queue.getJob(wakeUp))!.retry('failed', { resetAttemptsStarted: true });
        await waitFor(() => h.executor.callsFor(a) === 2, 'the retried W to run');
        await waitFor(() => done.some((c) => c.id === wakeUp), 'the retried W to complete (sent)');
      }
      go.open();
      expect(await clearing).toBe(1);
    } finally {
      restore();
      await worker?.close();
    }
  },
  30_000,
);
