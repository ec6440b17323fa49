import { Queue } from 'bullmq';
import { stageId } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { exactEngine } from '../../helpers/private-redis';

/**
 * What one batch call sends, measured exactly: on a Redis of our own nothing
 * else writes, so the server's write counter and command counts are this test's.
 */
const x = exactEngine();

describe("C27: what one batch call sends, exactly (the hot path's script)", () => {
  it('begins of two stage kinds in one call read the fence and the wake sequences in their MGETs (no GET of their own) and write the fence once', async () => {
    const queue = new Queue('reads', { connection: { host: '127.0.0.1', port: x.server.port }, prefix: 'exact' });
    const store = new DeferralStore(queue);
    try {
      const begin = (stage: string, i: number) =>
        store.begin({
          sid: stageId({ scope: ['book', `s${i}`], stage }),
          ownJobId: '',
          lockMs: 30_000,
          wakeUp: false,
          skewToleranceMs: 1000,
        });
      await Promise.all([begin('image', 0)]); // warm: the script is loaded
      await x.redis.config('RESETSTAT');
      // one turn: one call, three image stages and two video stages, each takes its lock
      const got = await Promise.all([
        begin('image', 1),
        begin('video', 2),
        begin('image', 3),
        begin('video', 4),
        begin('image', 5),
      ]);
      expect(got.map((b) => b.kind)).toEqual(['locked', 'locked', 'locked', 'locked', 'locked']);
      const fences = got.map((b) => (b.kind === 'locked' ? b.fencingToken : 0));
      for (let i = 1; i < fences.length; i++) expect(fences[i]).toBe(fences[i - 1]! + 1);
      const { commands } = await x.counters();
      const { info: _info, 'config|resetstat': _reset, ...rest } = commands;
      // the marker, the lock, and (first begin of the call, first of its kind) the fence and the
      // wake sequences: one MGET a begin; five locks and one write of the fence for the whole call
      expect(rest).toEqual({ evalsha: 1, time: 1, mget: 5, zrangebylex: 5, set: 6 });
      expect(await x.redis.get(store.keys.fence)).toBe(String(fences[4]));
    } finally {
      await store.close();
      await queue.close();
    }
  });
});
