import { randomUUID } from 'node:crypto';
import type { StageRef } from '../../src';
import { CLEAR_MARK } from '../../src/lua/scripts';
import { harness, notSent } from '../helpers/engine';

/**
 * Review 43 (held, pinned): a clear batch's CLEAR_MARK sent again (its reply lost with the
 * connection: ioredis resends it) marks and answers the same, and keeps the pending count a run
 * of a marked wake-up may already have added to (`SET ... NX`).
 */
const a: StageRef = { scope: ['r43-resent', 'ch-1'], stage: 'image' };

it('review 43: CLEAR_MARK sent again with the same nonce answers the same (the count opened, the markers) and keeps the pending count', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  const [d] = await h.engine.listDeferred(a.scope);
  const base = `${h.prefix}:${h.queueName}:`;
  const nonce = randomUUID();
  const mark = () => h.redis.eval(CLEAR_MARK, 1, h.engine.deferredStageKey(a), base, nonce, d!.wakeUpJobId);
  expect(await mark()).toEqual([1, d!.wakeUpJobId]);
  expect(await h.redis.hget(`${base}${d!.wakeUpJobId}`, 'sdq')).toBe(nonce);
  // a run of the marked wake-up counted itself meanwhile
  expect(await h.redis.sadd(`${base}sd:clrp:${nonce}`, d!.wakeUpJobId)).toBe(1);
  expect(await mark()).toEqual([1, d!.wakeUpJobId]);
  expect((await h.redis.smembers(`${base}sd:clrp:${nonce}`)).sort()).toEqual(['', d!.wakeUpJobId]);
  expect(await h.redis.pttl(`${base}sd:clrp:${nonce}`)).toBeGreaterThan(23 * 3_600_000);
  await h.redis.del(`${base}sd:clrp:${nonce}`);
});
