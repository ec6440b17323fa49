import { randomUUID } from 'node:crypto';
import type { StageRef } from '../../../src';
import { CLEAR_MARK } from '../../../src/lua/scripts';
import { harness } from '../../helpers/engine';
import { deferOnce } from '../../helpers/jobs';

/**
 * A clear batch's CLEAR_MARK sent again (its reply lost with the
 * connection: ioredis resends it) marks and answers the same, and keeps the pending count a run
 * of a marked wake-up may already have added to (`SET ... NX`).
 */
const a: StageRef = { scope: ['r43-resent', 'ch-1'], stage: 'image' };

it('C10: CLEAR_MARK sent again with the same nonce answers the same (the count opened, the markers) and keeps the pending count', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const wakeUp = await deferOnce(h, a);
  const base = `${h.prefix}:${h.queueName}:`;
  const nonce = randomUUID();
  const mark = () => h.redis.eval(CLEAR_MARK, 1, h.engine.deferredStageKey(a), base, nonce, wakeUp);
  expect(await mark()).toEqual([1, wakeUp]);
  expect(await h.redis.hget(`${base}${wakeUp}`, 'sdq')).toBe(nonce);
  // a run of the marked wake-up counted itself meanwhile
  expect(await h.redis.sadd(`${base}sd:clrp:${nonce}`, wakeUp)).toBe(1);
  expect(await mark()).toEqual([1, wakeUp]);
  expect((await h.redis.smembers(`${base}sd:clrp:${nonce}`)).sort()).toEqual(['', wakeUp]);
  expect(await h.redis.pttl(`${base}sd:clrp:${nonce}`)).toBeGreaterThan(23 * 3_600_000);
  await h.redis.del(`${base}sd:clrp:${nonce}`);
});
