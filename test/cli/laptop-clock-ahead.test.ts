import { cliWithClock } from '../helpers/cli-clock';
import { harness, notSent, SENT } from '../helpers/engine';
import { redisOptions, waitFor } from '../helpers/redis';
import type { StageRef } from '../../src';

/**
 * README, the operator table: "promotes a wake-up (Bull Board's Promote, `promoteJobs`) | the
 * stage wakes now". The ops CLI run from a laptop whose clock is 2 minutes ahead changes nothing
 * of how the fleet judges a wake-up (the tolerance of an early one is `maxClockSkewMs` alone):
 * Bull Board's Promote of a stage 60 s from its window's end still wakes it now.
 */
const a: StageRef = { scope: ['r34-laptop', 'ch-1'], stage: 'image' };
describe('C29: an operator runs the CLI from a laptop whose clock runs ahead', () => {
  it("after `wake` from a laptop 2 min ahead, Bull Board's Promote of a stage 60 s from its window's end still wakes it now", async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(a, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(a, {});
    const { host, port } = redisOptions();
    const r = await cliWithClock(120_000, [
      '--redis',
      `redis://${host}:${port}`,
      '--queue',
      h.queueName,
      '--prefix',
      h.prefix,
      '--json',
      'wake',
      '--stage',
      'video',
    ]);
    // nothing of that kind was deferred: exit 3 (nothing matched), and nothing woken
    expect({ code: r.code, stdout: r.stdout.trim() }).toEqual({ code: 3, stdout: '{"woken":[]}' });
    // the operator promotes the image stage's wake-up (Bull Board's Promote)
    const [d] = await h.engine.listDeferred();
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    const worker = h.engine.createWorker();
    try {
      // it wakes now: dispatched within a few seconds, not at its window's end (~60 s away)
      await waitFor(() => h.executor.callsFor(a) === 2, 'the promoted wake-up dispatched', 5000);
    } finally {
      await worker.close();
    }
    expect(h.executor.callsOf(a)[1]!.result).toMatchObject({ dispatched: true });
  }, 40_000);
});
