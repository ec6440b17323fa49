import type { Queue } from 'bullmq';
import { DeferralStore } from '../../../src/deferral-store';

/**
 * The clock-lead timer and close() after the split (LeadRecorder, StoreConnections)
 * behave as at d66dcc9: one timer, unref'd, stopped on close, none started after close; the
 * lead's record memoised; close twice / before any connect resolves. (Passes at d66dcc9 and HEAD.)
 */
function stubQueue() {
  return { name: 'q', opts: { prefix: 'r42' } } as unknown as Queue;
}

afterEach(() => jest.restoreAllMocks());

describe('C24: lead timer and close, as before the split', () => {
  it("promotesWakeUps: one unref'd timer, memoised, cleared by close; no timer once closed", async () => {
    const get = jest.fn(async () => null);
    const client = jest.spyOn(DeferralStore.prototype, 'client').mockResolvedValue({ get, set: jest.fn() } as never);
    const setI = jest.spyOn(global, 'setInterval');
    const clearI = jest.spyOn(global, 'clearInterval');
    const store = new DeferralStore(stubQueue());
    const p = store.promotesWakeUps();
    expect(store.promotesWakeUps()).toBe(p);
    await p;
    expect(setI).toHaveBeenCalledTimes(1);
    const timer = setI.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    expect(client).toHaveBeenCalledTimes(1);
    await store.close();
    expect(clearI).toHaveBeenCalledWith(timer);
    await store.close();

    const closedFirst = new DeferralStore(stubQueue());
    await closedFirst.close();
    await closedFirst.promotesWakeUps();
    expect(setI).toHaveBeenCalledTimes(1);
  });

  it('a store never connected closes at once, twice', async () => {
    const client = jest.spyOn(DeferralStore.prototype, 'client');
    const store = new DeferralStore(stubQueue());
    await store.close();
    await store.close();
    expect(client).not.toHaveBeenCalled();
  });
});
