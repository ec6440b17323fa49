import type { Queue } from 'bullmq';
import { DeferralStore } from '../../../src/deferral-store';

/** close() of a store that never connected: at once, twice, and without connecting. */
function stubQueue() {
  return { name: 'q', opts: { prefix: 'r42' } } as unknown as Queue;
}

afterEach(() => jest.restoreAllMocks());

describe('C24: a store closes without connecting', () => {
  it('a store never connected closes at once, twice', async () => {
    const client = jest.spyOn(DeferralStore.prototype, 'client');
    const store = new DeferralStore(stubQueue());
    await store.close();
    await store.close();
    expect(client).not.toHaveBeenCalled();
  });
});
