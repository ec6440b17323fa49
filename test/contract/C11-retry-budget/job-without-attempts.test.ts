import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fast, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: a dispatch job with no `attempts` of its own: the README's operator path
 * "re-adds a failed wake-up with `queue.add(job.name, job.data)`" (no options), or any job a
 * producer or an operator adds without `attempts`. Its first real failure.
 * Expected: README operator table: such a re-added job runs "with a fresh chain and a fresh
 * retry budget"; options table: `retry.attempts` (here 2) is the "budget for real failures per
 * stage"; the processor itself takes the job's budget as `job.opts.attempts ?? retry.attempts`
 * (src/bullmq/processor.ts, `ctx.attempts`). So one real failure is not final: it is retried.
 * What happens: BullMQ stores `attempts: 0` for a job added without attempts (as the engine's
 * own checkJobOptions says in its message for `@r.` ids). The processor takes the job's budget
 * as `job.opts.attempts ?? opts.retry.attempts` (src/bullmq/processor.ts, `ctx.attempts`): `??`
 * keeps the 0, so the engine's `retry.attempts` never applies, and `failsForGood` (spent 1 >=
 * 0) fails the job for good on its first real failure. checkJobOptions refuses `attempts: 0`
 * only for a producer's `@r.` id, not for the auto id `queue.add` gives the README's re-add.
 * Resolved in the README: a job added without `attempts` has BullMQ's budget for such a job, one
 * try (test/contract/C11-retry-budget/hand-added-budget.test.ts pins that, as plain BullMQ does); the operator
 * row now re-adds a wake-up with its retry options, `queue.add(job.name, job.data, { attempts:
 * job.opts.attempts, backoff: job.opts.backoff })`, which gets that budget afresh. The test pins it.
 */
const image: StageRef = { scope: ['book-26', 'ch-5', 'sc-1'], stage: 'image' };

describe('C11: a dispatch job added without attempts', () => {
  it('a failed wake-up re-added by hand with its retry options, as the README says, does not fail for good on its first failure: it gets a fresh retry budget', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), new Error('down'), new Error('down'));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 2, 'the wake-up failed for good (its budget of 2 spent)');
    const wakeUp = (await h.engine.queue.getJobs(['failed']))[0]!;
    expect(wakeUp.id).toMatch(/@cap\./);
    // the operator re-adds it: a fresh budget of 2, so one more failure is not final
    h.executor.script(image, new Error('still down'), SENT);
    const readded = await h.engine.queue.add(wakeUp.name, wakeUp.data, {
      attempts: wakeUp.opts.attempts,
      backoff: wakeUp.opts.backoff,
    });
    const finallyFailed = async () => (await readded.getState()) === 'failed';
    await waitFor(
      async () => done.length === 2 || (await finallyFailed()),
      'the re-added job completed or failed for good',
      15_000,
    );
    // its first failure must not be final: it is retried and sends the stage
    expect(await readded.getState()).not.toBe('failed');
    await waitFor(() => done.length === 2, 'the re-added job completed after its retry');
    expect(done[1]!.result).toMatchObject({ dispatched: true });
  }, 30_000);
});
