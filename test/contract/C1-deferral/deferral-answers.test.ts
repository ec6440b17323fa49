import { notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { recording } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C1: the deferral, run B (lines 370-502)', () => {
  it('a deferral answers exactly: not dispatched, its reason, retryable, the result marked retryable, until; no journalFailed', async () => {
    const { h } = recording(async () => notSent('no_worker_available'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toEqual({
      dispatched: false,
      reason: 'no_worker_available',
      retryable: true,
      result: { dispatched: false, jobs: 0, reason: 'no_worker_available', retryable: true },
      until: expect.any(Number),
    });
  });

  it("a new chain's first capacity deferral restarts its stage's wait, even where a wait outlived the old chain", async () => {
    const { h } = recording(async () => notSent('no_worker_available'));
    /** Waits until Redis' clock has moved past the last millisecond seen: the wait starts below differ. */
    let seen = 0;
    const tick = () =>
      waitFor(async () => {
        const [s, us] = await h.redis.time();
        const ms = Number(s) * 1000 + Math.floor(Number(us) / 1000);
        const later = ms > seen;
        seen = ms;
        return later;
      }, "Redis' clock to move on");
    const a = { scope: ['book-14', 'a'], stage: 'image' };
    const b = { scope: ['book-14', 'b'], stage: 'image' };
    // a's chain begins (its wait starts), then an operator removes its wake-up in Bull Board and
    // ends the deferral by hand; the next enqueue drops the licence of the job that is gone, but
    // the wait a's old chain started is still there
    const first = await h.engine.dispatchStage(a, {});
    const [listed] = await h.engine.listDeferred(['book-14', 'a']);
    await h.engine.queue.remove(listed!.wakeUpJobId);
    await h.redis.del(h.engine.deferredStageKey(a));
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
    expect(first.until).toEqual(expect.any(Number));
    await tick();
    // b's chain begins after a's old one, before a's new one
    await h.engine.dispatchStage(b, {});
    await tick();
    await tick();
    const again = await h.engine.dispatchStage(a, {});
    expect((await h.engine.listDeferred(['book-14', 'a']))[0]).toMatchObject({ deferrals: 1 });
    expect(again.until).toEqual(expect.any(Number));
    // longest-waiting first: b, whose chain began before a's new one
    expect((await h.engine.wakeDeferred({ limit: 1 })).woken).toEqual([b]);
  });
});
