import { randomUUID } from 'node:crypto';
import type { StageRef } from '../../../src';
import { CLEAR, CLEAR_MARK } from '../../../src/lua/scripts';
import { harness } from '../../helpers/engine';
import { deferOnce } from '../../helpers/jobs';

/**
 * Commit c274074 took back a refused promotion's mark, and told one whose run had counted
 * itself, in a script of its own sent with no key: on a Cluster it went to any node (where it
 * found nothing and answered nothing), and a reply of it lost with the connection could not be
 * answered again (its count already taken). Fixed: the batch's CLEAR does it, its keys declared,
 * and keeps its whole answer (the count and those ids) for a resend, as it keeps its count.
 */
const a: StageRef = { scope: ['r46-resent', 'ch-1'], stage: 'image' };

it("C10: a batch's CLEAR with a refused promotion whose run counted itself answers {count, that id}, takes the bare marks back, and answers the same when sent again", async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const w = await deferOnce(h, a);
  const base = `${h.prefix}:${h.queueName}:`;
  const nonce = randomUUID();
  const pending = `${base}sd:clrp:${nonce}`;
  expect(await h.redis.eval(CLEAR_MARK, 1, h.engine.deferredStageKey(a), base, nonce, w)).toEqual([1, w]);
  // its promotion refused; a run of it counted itself meanwhile (BATCH adds its id), its mark left bare here
  expect(await h.redis.sadd(pending, w)).toBe(1);
  const clear = () =>
    h.redis.eval(CLEAR, 3, `${base}sd:licences`, `${base}sd:clr:${nonce}`, pending, base, nonce, 0, w);
  expect(await clear()).toEqual([1, w]);
  expect(await h.redis.hget(`${base}${w}`, 'sdq')).toBeNull();
  expect(await h.redis.exists(pending)).toBe(0);
  // sent again (its reply lost): the same answer, from the batch's kept answer
  expect(await clear()).toEqual([1, w]);
});
