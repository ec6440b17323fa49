import Redis from 'ioredis';
import { quitOrDrop } from '../../../src/store/client';
import { redisOptions } from '../../helpers/redis';

/**
 * Passing checks of commit 1356aa9's `quitOrDrop` (src/store/client.ts), used by
 * engine.close (the engine's own worker connections) and DeferralStore.close (its renewal
 * connection). Nothing here writes to Redis: the ioredis cases only connect to the tests' Redis
 * (`REDIS_URL`) and quit.
 */
const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('C24: quitOrDrop', () => {
  it('a QUIT that fails at once (a connection already ended) drops once, resolves at once, and leaves no timer', async () => {
    const before = timeouts();
    let drops = 0;
    const started = performance.now();
    await quitOrDrop({
      quit: () => Promise.reject(new Error('Connection is closed.')),
      disconnect: () => void drops++,
    });
    expect({ drops, fast: performance.now() - started < 200, timers: timeouts() - before }).toEqual({
      drops: 1,
      fast: true,
      timers: 0,
    });
  });

  it('a QUIT answered in time is not followed by a drop, and leaves no timer', async () => {
    const before = timeouts();
    let drops = 0;
    await quitOrDrop({ quit: () => new Promise((r) => setTimeout(() => r('OK'), 50)), disconnect: () => void drops++ });
    expect({ drops, timers: Math.max(0, timeouts() - before) }).toEqual({ drops: 0, timers: 0 });
  });

  it('a QUIT never answered is dropped after about 1 s; its late rejection is handled', async () => {
    let drops = 0;
    let reject!: (e: Error) => void;
    const started = performance.now();
    await quitOrDrop({
      quit: () => new Promise((_, rj) => (reject = rj)),
      disconnect: () => {
        drops++;
        // ioredis rejects the pending QUIT when the connection is dropped
        reject(new Error('Connection is closed.'));
      },
    });
    const took = performance.now() - started;
    expect({ drops, inWindow: took >= 900 && took < 3000 }).toEqual({ drops: 1, inWindow: true });
  });

  it("quitOrDrop of an ioredis connection already `end` drops it again, arming ioredis' 2 s disconnect timer on its closed socket", async () => {
    const c = new Redis({ ...redisOptions(), lazyConnect: true, maxRetriesPerRequest: null });
    await c.connect();
    await c.quit();
    await new Promise((r) => (c.status === 'end' ? r(undefined) : c.once('end', r)));
    await new Promise((r) => setTimeout(r, 50));
    const before = timeouts();
    const started = performance.now();
    await quitOrDrop(c);
    const fast = performance.now() - started < 500;
    // QUIT on an ended connection rejects ("Connection is closed."): quitOrDrop then calls
    // disconnect(), whose connector sets a `disconnectTimeout` (2 s) timer cleared only by a
    // 'close' event that already happened: a ref'd timer keeps the process alive 2 s after
    // engine.close() resolved (jest: "did not exit one second after the test run")
    const left = timeouts() - before;
    // (let that timer run out, so the run exits)
    const deadline = Date.now() + 3000;
    while (timeouts() > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect({ status: c.status, fast, timersLeft: left }).toEqual({ status: 'end', fast: true, timersLeft: 0 });
  });

  it('an ioredis connection never connected (lazyConnect, `wait`) ends without opening a socket for long', async () => {
    const c = new Redis({ ...redisOptions(), lazyConnect: true });
    const started = performance.now();
    await quitOrDrop(c);
    const deadline = Date.now() + 2000;
    while (c.status !== 'end' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect({ status: c.status, fast: performance.now() - started < 500 }).toEqual({ status: 'end', fast: true });
  });
});
