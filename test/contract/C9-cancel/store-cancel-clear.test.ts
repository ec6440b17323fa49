import type { Queue } from 'bullmq';
import { DeferralStore } from '../../../src/deferral-store';
import { Transactions } from '../../../src/store/transaction';

/**
 * a review (the split of deferral-store.ts, meant to change no behaviour). At d66dcc9,
 * `cancel` removed its jobs through `this.removeJobs` and `clear` read its licences through
 * `this.licencesIn`: both went through the store's own methods (so a prototype spy, a
 * subclass or a test hook on them saw, or replaced, what cancel and clear did). After the
 * split, `cancelStage` and `clearScope` call the module functions directly: the store's
 * methods are skipped. Commit 41d2c91 put `defer` back on `this.removeJobs` for this very
 * reason; cancel and clear were left bypassing theirs. No Redis needed: the queue is a stub.
 */
function stubQueue() {
  return {
    name: 'q',
    opts: { prefix: 'r42' },
    remove: jest.fn(async () => 1),
    getJobState: jest.fn(async () => 'waiting'),
  } as unknown as Queue;
}

afterEach(() => jest.restoreAllMocks());

describe("C9: the store's cancel and clear: their jobs removed, their licences listed", () => {
  it('cancel removes its jobs through DeferralStore.removeJobs (as defer does)', async () => {
    // CANCEL's reply: no deferral, not in flight, a pending enqueued job 'pending-1', no licences
    jest.spyOn(Transactions.prototype, 'one').mockResolvedValue([0, 0, 'pending-1']);
    const removeJobs = jest.spyOn(DeferralStore.prototype, 'removeJobs');
    const store = new DeferralStore(stubQueue());
    const r = await store.cancel('stage-1');
    expect(r).toEqual({ hadDeferral: false, inFlight: false, removedJobs: 1 });
    expect(removeJobs).toHaveBeenCalledWith(['pending-1']);
  });

  it('clear reads its licences through DeferralStore.licencesIn', async () => {
    const licencesIn = jest.spyOn(DeferralStore.prototype, 'licencesIn').mockResolvedValue(['a!', 'b?']);
    // a client with nothing on it: only licencesIn (stubbed) may be asked for the index
    jest.spyOn(DeferralStore.prototype, 'client').mockResolvedValue({} as never);
    const store = new DeferralStore(stubQueue());
    await expect(store.clear('scope\x1f')).resolves.toBe(0);
    expect(licencesIn).toHaveBeenCalledWith('scope\x1f');
  });
});
