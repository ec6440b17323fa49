import { harness, SENT } from '../../helpers/engine';
import { connect } from '../../helpers/redis';

const image = { scope: ['book-b', 'a'], stage: 'image' };

describe('C25: the scripts on a shared ioredis client', () => {
  it('another copy of the library (another version) that defined its scripts on the same client does not change the ones this copy runs', async () => {
    const shared = connect({ maxRetriesPerRequest: null });
    // what an older copy leaves on the client: its own scripts under the names it uses
    // (this library's names before they carried a digest of the script)
    for (const name of ['sdBatch', 'sdDefer', 'sdProbe', 'sdPermissions'])
      shared.defineCommand(name, { numberOfKeys: 0, lua: "return redis.error_reply('the other copy')" });
    const h = harness({ connection: shared });
    h.executor.script(image, SENT);
    await h.engine.waitUntilReady();
    await expect(h.engine.dispatchStage(image, {})).resolves.toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(1);
  });
});
