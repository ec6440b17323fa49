/**
 * BATCH's release called directly (its flattened text, src/lua/generated.ts) on failed-job records
 * built by hand: a chain's end keeps only the records of jobs still failed for good.
 */
import * as lua from '../../../src/lua/generated';
import { scriptSuite } from '../../helpers/redis';

const suite = scriptSuite();
const { redis } = suite;
const SID = 'book-1/image';

describe("C27: a chain's end and the stage's failed-job records", () => {
  it('C27: drops the records of jobs gone and of jobs retried by hand (superseded), keeps those still failed', async () => {
    const IDX = `${suite.B}sd:licences`;
    const wake = `${SID}@cap.1.0.0.1`;
    // the licence holder, a job retried by hand (not finished), a job still failed; the gone one has no hash
    await redis.hset(suite.B + wake, 'timestamp', 1);
    await redis.hset(`${suite.B}${SID}@again`, 'timestamp', 1);
    await redis.hset(`${suite.B}${SID}@failed`, 'timestamp', 1, 'finishedOn', 2);
    await redis.zadd(IDX, 0, wake, 0, `${SID}@gone?`, 0, `${SID}@again?`, 0, `${SID}@failed?`);
    await redis.set(`${suite.B}sd:inflight:${SID}`, '\n9', 'PX', 60_000);
    const args = [suite.B, 1, 'r', SID, '', '\n9', '1', '', '', ''];
    const [reply] = (await redis.eval(lua.BATCH, 2, IDX, `${suite.B}sd:fence`, ...args.map(String))) as unknown[];
    expect(reply).toEqual([0, wake]);
    expect(await redis.zrange(IDX, '0', '-1')).toEqual([`${SID}@failed?`]);
    expect(await redis.hget(`${suite.B}${SID}@again`, 'sds')).toBe('1');
    expect(await redis.hget(`${suite.B}${SID}@failed`, 'sds')).toBeNull();
  });
});
