/**
 * WAKE called directly (its flattened text, src/lua/generated.ts) on a resource's line built by
 * hand, longer than the page a wake reads at a time: an entry whose chain ended leaves the line as
 * the wake reads past it, and the wake still reaches the oldest waiting stage behind the page.
 */
import * as lua from '../../../src/lua/generated';
import { scriptSuite } from '../../helpers/redis';

const suite = scriptSuite();
const { redis } = suite;
const sid = (n: number) => `book/sc-${String(n).padStart(3, '0')}/image`;

describe('C31: a wake of a line longer than a page', () => {
  it('wakes the oldest waiting stage behind a chain that ended and 199 stages woken before', async () => {
    const line = `${suite.B}sd:wq:@gpu`;
    const IDX = `${suite.B}sd:licences`;
    const p = redis.pipeline();
    // 0: its chain ended (it holds nothing); 1..199: woken, still running (a licence, no marker);
    // 200 and 201: waiting (a marker naming a wake-up that exists)
    for (let n = 0; n < 202; n++) p.zadd(line, n, sid(n));
    for (let n = 1; n < 200; n++) p.zadd(IDX, 0, `${sid(n)}@j${n}`);
    for (const n of [200, 201]) {
      const wake = `${sid(n)}@cap.1.0.0.${n}`;
      p.zadd(IDX, 0, wake);
      p.set(`${suite.B}sd:deferred:${sid(n)}`, wake, 'PX', 60_000);
      p.hset(suite.B + wake, 'timestamp', 1);
    }
    await p.exec();
    const reply = await redis.eval(lua.WAKE, 3, IDX, `${suite.B}sd:wqk`, line, suite.B, '1', '', '@gpu');
    expect(reply).toEqual([sid(200), `${sid(200)}@cap.1.0.0.200`, 0]);
    // the ended chain's entry is gone; the woken ones keep their places
    expect(await redis.zcard(line)).toBe(201);
    expect(await redis.zscore(line, sid(0))).toBeNull();
  });
});
