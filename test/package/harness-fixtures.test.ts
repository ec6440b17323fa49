import { harness, notSent, type Harness } from '../helpers/engine';
import { client, closeClients, keysUnder } from '../helpers/redis';

/**
 * The fixture layer's own promise: an engine made with `harness()` is torn
 * down after its test without the file asking (no `afterEach(teardown)` here):
 * closed, and its keys gone.
 */
describe('C30: harness() registers its own teardown', () => {
  let first: Harness | undefined;
  afterAll(closeClients);

  it('a test leaves an engine with keys behind', async () => {
    first = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    first.executor.script({ scope: ['a'], stage: 's' }, notSent('no_worker_available'));
    await first.engine.dispatchStage({ scope: ['a'], stage: 's' }, {});
    expect((await keysUnder(first.redis, first.prefix)).length).toBeGreaterThan(0);
  });

  it('the next test finds that engine closed and its keys deleted', async () => {
    expect(first).toBeDefined();
    await expect(first!.engine.isStageDeferred({ scope: ['a'], stage: 's' })).rejects.toMatchObject({
      code: 'ENGINE_CLOSED',
    });
    expect(await keysUnder(client(), first!.prefix)).toEqual([]);
  });
});
