import { harness } from '../../helpers/engine';

/**
 * a fix: close() waits for the calls under way (src/engine.ts
 * TRACKED: enqueue, cancelActiveDispatch, clearDeferrals, wakeDeferred, isStageDeferred,
 * listDeferred) so that each "completes, or fails with the engine's typed EngineClosedError,
 * never ioredis' bare error". `waitUntilReady` is left out of TRACKED: a readiness probe (a
 * health check at start-up) racing a shutdown has its connection closed under it and rejects with
 * BullMQ's untyped "Connection is closed." instead.
 */
describe('C24: waitUntilReady racing close()', () => {
  it('waitUntilReady racing close() resolves or is ENGINE_CLOSED, never a bare connection error', async () => {
    const h = harness();
    const p = h.engine.waitUntilReady();
    const closing = h.engine.close();
    const outcome = await p.then(
      () => ({ ok: true }),
      (e: Error & { code?: string }) => ({ error: e.code ?? `${e.name}: ${e.message}` }),
    );
    await closing;
    expect([{ ok: true }, { error: 'ENGINE_CLOSED' }]).toContainEqual(outcome);
  });
});
