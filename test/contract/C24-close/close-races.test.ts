import { harness, notSent } from '../../helpers/engine';
import { client } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A host shuts down (SIGTERM -> engine.close()) while a producer
 * call or an operator's call is on its way. `close()` waits for dispatch
 * attempts only; the store's and the queue's connections close under the
 * other calls. They must complete, or fail with the engine's typed
 * `EngineClosedError` (code ENGINE_CLOSED), and must never answer something
 * that is not so.
 */
const ref: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };

describe('C24: calls on their way when engine.close() is called', () => {
  it("an enqueue racing close() completes (close waits for it) or is ENGINE_CLOSED, never ioredis' bare error", async () => {
    const h = harness();
    await h.engine.waitUntilReady();
    const p = h.engine.enqueue(ref, {});
    const closing = h.engine.close();
    const outcome = await p.then(
      (r) => ({ ok: r.added }),
      (e: Error & { code?: string }) => ({ error: e.code ?? `${e.name}: ${e.message}` }),
    );
    await closing;
    // either it was added, or it failed with the engine's own error
    expect([{ ok: true }, { error: 'ENGINE_CLOSED' }]).toContainEqual(outcome);
  });

  it('a clearDeferrals racing close() answers what Redis holds (1 cleared and not deferred), or an error', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(ref, {});
    const p = h.engine.clearDeferrals(['book-1']);
    const closing = h.engine.close();
    const outcome = await p.then(
      (n) => ({ cleared: n }),
      (e: Error & { code?: string }) => ({ error: e.code ?? e.message }),
    );
    await closing;
    const stillDeferred = (await client().exists(h.engine.deferredStageKey(ref))) === 1;
    // the answer must match Redis: 1 cleared and not deferred, or an error (CLEAR_INCOMPLETE / ENGINE_CLOSED)
    if ('cleared' in outcome) expect({ ...outcome, stillDeferred }).toEqual({ cleared: 1, stillDeferred: false });
    else expect(['CLEAR_INCOMPLETE', 'ENGINE_CLOSED']).toContain(outcome.error);
  });
});
