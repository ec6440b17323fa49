import { exactEngine } from '../../helpers/private-redis';

/**
 * While a stage is deferred, measured exactly: on a Redis of our own nothing else
 * writes, so the server's write counter and command counts are this test's.
 */
const x = exactEngine();
const ref = { scope: ['book', 'ch', 'sc'], stage: 'image' };

describe('C2: while a stage is deferred (exact counts on a private Redis)', () => {
  it('a suppressed dispatchStage is 1 command and 0 writes; so is a suppressed enqueue', async () => {
    await x.engine.dispatchStage(ref, {});
    expect(x.calls).toBe(1);
    await x.engine.dispatchStage(ref, {}); // warm: the script is loaded
    await x.engine.enqueue(ref, {});
    await x.redis.config('RESETSTAT');
    const before = await x.counters();
    for (let i = 0; i < 50; i++) {
      expect((await x.engine.dispatchStage(ref, {}, { force: true })).reason).toBe('deferred_capacity');
      expect((await x.engine.enqueue(ref, {})).reason).toBe('deferred');
    }
    const after = await x.counters();
    expect(after.writes - before.writes).toBe(0);
    // one round trip each: 100 script x.calls (the reads inside them are MGET/GET/EXISTS/PTTL: the
    // begin reads the marker and the lock in one MGET, the probe the marker; both then check that
    // the marker's wake-up exists; the probe reads its TTL, the begin the wake-up's id)
    // (the test's own INFO and CONFIG RESETSTAT are left out)
    const { info: _info, 'config|resetstat': _reset, ...rest } = after.commands;
    expect(rest.evalsha).toBe(100);
    // TIME: the batch reads Redis' clock (windows are decided on it); a read
    expect(Object.keys(rest).sort()).toEqual(['evalsha', 'exists', 'get', 'mget', 'pttl', 'time']);
    expect(x.calls).toBe(1);
  });
});
