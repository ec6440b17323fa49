import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: one stage has two jobs that failed for good (kept, `removeOnFail` unset: the
 * record a cancel and a retry by hand reach, docs/producers.md): its job failed for good, then a
 * scheduler enqueued the stage again ("enqueue is not blocked by it", engine.ts recordFailures)
 * and that job failed too. The operator then presses Bull Board's "Retry all" on the failed
 * jobs (`queue.retryJobs({ state: 'failed' })`).
 * Expected: the stage is dispatched once. While one job of a stage is pending, the engine keeps
 * a second from being added (README: "`enqueue` and the stage has a job waiting, running or
 * deferred → { added: false, reason: 'pending' }"; the enqueue probe counts a record retried by
 * hand as pending), and the chain's end supersedes a job added for the stage while it was
 * pending (scripts.ts, release: "it is superseded, as the probe would have kept it from being
 * added").
 * What happens: each retried job begins as "retried by hand" (`retried` in begin), which
 * overrides `sds`, and the chain end of the first (release, mode '1', the `?` records loop)
 * supersedes only a record whose job is still active/handed on, never one retried and waiting:
 * the second job sends the stage again after the first sent it. One click, the stage sent twice.
 */
const image: StageRef = { scope: ['book-26', 'ch-4', 'sc-1'], stage: 'image' };

describe("C16: Bull Board's Retry all on two failed jobs of one stage", () => {
  it("a stage is sent once when an operator retries all failed jobs and two of them are the same stage's (the other completes as superseded)", async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, new Error('downstream 500'), new Error('downstream 500'), SENT, SENT);
    const worker = h.engine.createWorker();
    const { failed, done } = watch(worker);
    const first = await h.engine.enqueue(image, {});
    expect(first.added).toBe(true);
    await waitFor(() => failed.length === 1, 'the first job failed for good');
    // a scheduler's next tick: the failed job does not block the stage
    const second = await h.engine.enqueue(image, {});
    expect(second.added).toBe(true);
    await waitFor(() => failed.length === 2, 'the second job failed for good');
    // the operator: "Retry all" on the failed jobs
    await h.engine.queue.retryJobs({ state: 'failed' });
    await waitFor(() => done.length === 2, 'both retried jobs ran', 15_000);
    const sent = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
    expect(sent).toBe(1);
  }, 30_000);
});
