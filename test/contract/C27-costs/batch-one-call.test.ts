import { DeferralStore } from '../../../src/deferral-store';
import { stageId } from '../../../src';
import type { Batcher, OpArgs } from '../../../src/store/batch';
import { harness } from '../../helpers/engine';
import { wrapBatch } from '../../helpers/faults';
import { probe } from '../../helpers/visible';

/**
 * docs/design.md, "begin and release share one script (`BATCH`)": the begins
 * and releases of one event-loop turn go to Redis as one call and run in
 * order. Each operation carries a different number of arguments (begin 7, a
 * release 6); each must get its own reply.
 */
const refs = ['a', 'b', 'c'].map((s) => ({ scope: ['book-b', s], stage: 'image' }));
const [A, B, C] = refs.map(stageId) as [string, string, string];
/** The ref of a stage id of this file (plain segments, nothing percent-encoded). */
const refOf = (sid: string) => {
  const parts = sid.split('/');
  return { scope: parts.slice(0, -1), stage: parts[parts.length - 1]! };
};

function setUp() {
  const h = harness();
  const store = new DeferralStore(h.engine.queue);
  // whether a dispatch of the stage is in flight, as the published enqueue probe answers a producer
  const inFlight = async (sid: string) => (await probe(h, refOf(sid))).kind === 'in_flight';
  const begin = (sid: string) =>
    store.begin({ sid, ownJobId: '', lockMs: 30_000, wakeUp: false, skewToleranceMs: 1000 });
  const token = async (sid: string) => {
    const b = await begin(sid);
    if (b.kind !== 'locked') throw new Error(`${sid} not locked: ${b.kind}`);
    return b.token;
  };
  return { h, store, inFlight, begin, token };
}

/**
 * INTERNAL ENCODING, not part of the contract: sets the queue's fencing counter (its key, which a
 * core with another layout may not have) so that tokens leave Redis' clock behind and each step
 * of one is seen; no public call sets it.
 */
async function internalSetFence(h: ReturnType<typeof harness>, store: DeferralStore, value: string) {
  await h.redis.set(store.keys.fence, value);
}

describe('C27: BATCH: the operations of one turn, in one call', () => {
  it('a release, then a begin: the release ends its stage, the begin takes its own', async () => {
    const { store, inFlight, begin, token } = setUp();
    const a = await token(A);
    // queued in the same turn: one BATCH call runs both, the release first
    const [released, b] = await Promise.all([store.release(A, '', a, 'end'), begin(B)]);
    expect(released).toEqual({ cancelled: false, lost: false, revoked: [] });
    expect(b.kind).toBe('locked');
    expect([await inFlight(A), await inFlight(B)]).toEqual([false, true]);
    // B holds its lock under the token its begin answered: releasing with it ends B's dispatch
    const token2 = b.kind === 'locked' ? b.token : '';
    expect(await store.release(B, '', token2, 'plain')).toEqual({ cancelled: false, lost: false, revoked: [] });
    expect(await inFlight(B)).toBe(false);
  });

  it('two releases and a begin: each acts on its own stage', async () => {
    const { store, inFlight, begin, token } = setUp();
    const [a, b] = [await token(A), await token(B)];
    const [, released, c] = await Promise.all([
      store.release(A, '', a, 'end'),
      store.release(B, '', b, 'plain'),
      begin(C),
    ]);
    expect(released).toEqual({ cancelled: false, lost: false, revoked: [] });
    expect(c.kind).toBe('locked');
    expect([await inFlight(A), await inFlight(B), await inFlight(C)]).toEqual([false, false, true]);
  });
});

describe('C27: BATCH: what one call reads once', () => {
  it("the fence and each kind's wake sequence are read once a call and afresh by the next: fences strictly increase, a wake between calls is seen", async () => {
    const { h, store, begin } = setUp();
    const video = { scope: ['book-b', 'a'], stage: 'video' };
    const V = stageId(video);
    const begins = async () => {
      // queued in one turn: one BATCH call, an image stage and a video stage
      const both = await Promise.all([begin(A), begin(V)]);
      const locked = both.map((b) => (b.kind === 'locked' ? b : undefined));
      await Promise.all(locked.map((b, i) => store.release([A, V][i]!, '', b!.token, 'plain')));
      return locked.map((b) => ({ fence: b!.fencingToken, seq: b!.wakeSeq }));
    };
    const one = await begins();
    expect(one.map((b) => b.seq)).toEqual(['0:0', '0:0']);
    // a wake of the video kind, then one of every kind: the next call reads both counters again
    await h.engine.wakeDeferred({ stage: 'video' });
    await h.engine.wakeDeferred();
    const two = await begins();
    expect(two.map((b) => b.seq)).toEqual(['1:0', '1:1']);
    // a fence far ahead of Redis' clock (µs): each token of the call is one more, and the next
    // call goes on from the call's last
    await internalSetFence(h, store, '9000000000000000');
    const three = await begins();
    expect(three.map((b) => b.fence)).toEqual([9000000000000001, 9000000000000002]);
    const four = await begins();
    expect(four.map((b) => b.fence)).toEqual([9000000000000003, 9000000000000004]);
    const fences = [...one, ...two, ...three, ...four].map((b) => b.fence);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
  });
});

describe('C27: BATCH: each caller gets its own answer, whatever the others get', () => {
  it('a reply one caller cannot read rejects that caller only: the others of the call get theirs', async () => {
    const { store, inFlight } = setUp();
    const batch = (store as unknown as { batch: Batcher }).batch;
    // a lock taken on a stage without a licence answers its record alone (a string)
    const read = (reply: unknown) => {
      if (typeof reply !== 'string') throw new TypeError('unreadable');
      return reply;
    };
    const op = (sid: string): OpArgs => ['b', sid, '', 30_000, '', 1000, '', ''];
    // one call: B's lock is taken first, so the second begin of B answers in flight (2), which `read` refuses
    const [a, b, again, c] = await Promise.allSettled([
      batch.run(op(A), read),
      batch.run(op(B), read),
      batch.run(op(B), read),
      batch.run(op(C), read),
    ]);
    expect([a.status, b.status, again.status, c.status]).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    // the two begins after the refused reply took their locks and say so
    for (const sid of [A, B, C]) expect(await inFlight(sid)).toBe(true);
    expect(c.status === 'fulfilled' && typeof c.value).toBe('string');
  });

  it('the operations of one turn go in calls of at most 256, each once: 512 begins make two calls, 256 each', async () => {
    const { h, inFlight, begin } = setUp();
    await begin(A); // the store defines its scripts on the client on first use
    const sizes: number[] = [];
    const putBack = await wrapBatch(h.engine, (send) => (...args: unknown[]) => {
      sizes.push(Number(args[3]));
      return send(...args);
    });
    try {
      const sids = Array.from({ length: 512 }, (_, i) => stageId({ scope: ['book-b', `many-${i}`], stage: 'image' }));
      const begun = await Promise.all(sids.map(begin));
      expect(sizes).toEqual([256, 256]);
      expect(begun.every((b) => b.kind === 'locked')).toBe(true);
      const tokens = new Set(begun.map((b) => (b.kind === 'locked' ? b.token : '')));
      expect(tokens.size).toBe(512);
      expect((await Promise.all(sids.map(inFlight))).filter(Boolean)).toHaveLength(512);
    } finally {
      putBack();
    }
  });
});
