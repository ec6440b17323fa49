import { DeferralStore } from '../../../src/deferral-store';
import { stageId } from '../../../src';
import type { BeginOutcome } from '../../../src/deferral-store';
import { harness } from '../../helpers/engine';
import { fetchBy } from '../../helpers/jobs';
import { onCluster } from '../../helpers/redis';

/**
 * BATCH's fence reservation (one SET per batch), the one-string record of a lock
 * taken, and the first begin's MGET that also reads F and the wake sequences.
 */
const ref = (s: string, stage = 'image') => ({ scope: ['book-41', s], stage });
const sidOf = (s: string, stage = 'image') => stageId(ref(s, stage));

function setUp() {
  const h = harness();
  const store = new DeferralStore(h.engine.queue);
  const base = `${h.prefix}:${h.queueName}:`;
  const begin = (sid: string, ownJobId = '', bullToken?: string, wakeUp = false) =>
    store.begin({ sid, ownJobId, lockMs: 30_000, wakeUp, skewToleranceMs: 1000, bullToken });
  return { h, store, base, begin };
}

const fenceOf = (b: BeginOutcome) => (b.kind === 'locked' ? b.fencingToken : undefined);

describe('C13: a batch that mixes begins', () => {
  it('a deferred begin, a direct begin of another kind, a tied job attempt and a job attempt with a stale BullMQ token, in one call: each reads right, the tokens increase, F holds first + begins - 1', async () => {
    const { h, store, base, begin } = setUp();
    // two jobs of the queue fetched under BullMQ tokens
    await h.engine.enqueue(ref('j1'), {});
    const j1 = await fetchBy(h, 'bull-1');
    await h.engine.enqueue(ref('j2', 'video'), {});
    const j2 = await fetchBy(h, 'bull-2');
    const A = sidOf('a');
    // a marker naming a wake-up that exists (one whose wake-up is gone defers nothing)
    await h.redis.hset(`${base}someone-else`, 'timestamp', 1);
    await h.redis.set(`${base}sd:deferred:${A}`, 'someone-else', 'PX', 60_000);
    await h.engine.wakeDeferred({ stage: 'video' });
    await h.engine.wakeDeferred();
    await h.engine.wakeDeferred();
    const before = Number(await h.redis.get(store.keys.fence)) || 0;
    const [a, b, c, d] = await Promise.all([
      begin(A), // deferred (first begin of the batch: reads F and the image/all counters)
      begin(sidOf('b', 'video'), ''), // direct call, first of kind video
      begin(sidOf('j1'), j1.id as string, 'bull-1'), // tied job attempt, kind image
      begin(sidOf('j2', 'video'), j2.id as string, 'not-bull-2'), // stale token: gone
    ]);
    expect(a.kind).toBe('deferred');
    expect(b).toMatchObject({ kind: 'locked', wakeSeq: '2:1', licence: null });
    expect(c).toMatchObject({ kind: 'locked', wakeSeq: '2:0' });
    expect(d.kind).toBe('gone');
    expect(c.kind === 'locked' && c.token).toBe(`${j1.id}\n${fenceOf(c)}\nbull-1`);
    expect(await h.redis.get(store.keys.lock(sidOf('j1')))).toBe(c.kind === 'locked' ? c.token : null);
    expect(fenceOf(b)!).toBeGreaterThan(before);
    expect(fenceOf(c)).toBe(fenceOf(b)! + 1);
    // four begins reserved four tokens from the first handed out
    expect(Number(await h.redis.get(store.keys.fence))).toBe(fenceOf(b)! + 3);
    // and the next call's first token is past the reservation
    const e = await begin(sidOf('e'));
    expect(fenceOf(e)).toBeGreaterThan(fenceOf(b)! + 3);
  });
});

describe("C13: the first begin of a call reads BullMQ's job lock, F and the counters in one MGET", () => {
  it('a call led by a job attempt with a stale BullMQ token (gone), then two releases, then a job attempt with the right one and a direct call: the reservation counts begins only', async () => {
    const { h, store, begin } = setUp();
    await h.engine.enqueue(ref('j1'), {});
    const j1 = await fetchBy(h, 'bull-1');
    await h.engine.enqueue(ref('j2', 'video'), {});
    const j2 = await fetchBy(h, 'bull-2');
    const x = await begin(sidOf('x'));
    const y = await begin(sidOf('y'));
    if (x.kind !== 'locked' || y.kind !== 'locked') throw new Error('not locked');
    await h.engine.wakeDeferred({ stage: 'video' });
    const stale = begin(sidOf('j1'), j1.id as string, 'bull-9');
    const releasedX = store.release(sidOf('x'), '', x.token, 'end');
    const released = store.release(sidOf('y'), '', y.token, 'plain');
    const [s, , r, t, d] = await Promise.all([
      stale,
      releasedX,
      released,
      begin(sidOf('j2', 'video'), j2.id as string, 'bull-2'),
      begin(sidOf('d')),
    ]);
    expect(s.kind).toBe('gone');
    expect(r).toMatchObject({ lost: false });
    expect(t).toMatchObject({ kind: 'locked', wakeSeq: '0:1' });
    expect(d).toMatchObject({ kind: 'locked', wakeSeq: '0:0' });
    expect(fenceOf(d)).toBe(fenceOf(t)! + 1);
    // three begins in the call, the first took no lock: F is the first token handed out + 2
    expect(Number(await h.redis.get(store.keys.fence))).toBe(fenceOf(t)! + 2);
    expect(await h.redis.exists(store.keys.lock(sidOf('x')))).toBe(0);
  });
});

describe('C13: the fence after a script error half-way', () => {
  it('a begin whose job hash is of the wrong type errors the call after another begin took a lock: no later token repeats or undercuts that lock', async () => {
    const { h, store, base, begin } = setUp();
    await h.redis.set(`${base}poison`, 'not a hash');
    const [a, p] = await Promise.allSettled([begin(sidOf('a')), begin(sidOf('p'), 'poison')]);
    expect(a.status).toBe('rejected');
    expect(p.status).toBe('rejected');
    // the first begin's lock was taken and stays (Redis does not roll a script back)
    const held = await h.redis.get(store.keys.lock(sidOf('a')));
    expect(held).not.toBeNull();
    const heldFence = Number(held!.split('\n')[1]);
    const next = await Promise.all([begin(sidOf('b')), begin(sidOf('c'))]);
    for (const n of next) expect(fenceOf(n)!).toBeGreaterThan(heldFence);
  });
});

(onCluster ? describe.skip : describe)('C13: a rolling upgrade', () => {
  it("the previous version's fence steps (a SET per token) between calls of this one: every token larger than the last", async () => {
    const { h, store, begin } = setUp();
    const fences: number[] = [];
    // what the previous version's BATCH did with the fence, per lock taken: max(last + 1, Redis' µs), written at once
    const OLD_FENCE_STEPS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out, fence = {}, nil
for i = 1, tonumber(ARGV[1]) do
  fence = math.max((fence or tonumber(redis.call('GET', KEYS[1])) or 0) + 1, now * 1000)
  out[i] = string.format('%.0f', fence)
  redis.call('SET', KEYS[1], out[i])
end
return out`;
    const oldBatch = async (sids: string[]) => {
      const r = (await h.redis.eval(OLD_FENCE_STEPS, 1, store.keys.fence, sids.length)) as string[];
      for (const x of r) fences.push(Number(x));
    };
    for (let round = 0; round < 5; round++) {
      const sids = [0, 1, 2].map((i) => sidOf(`n${round}-${i}`));
      const got = await Promise.all([begin(sidOf(`d${round}`)), ...sids.map((s) => begin(s))]);
      for (const g of got) if (g.kind === 'locked') fences.push(g.fencingToken);
      await oldBatch([0, 1, 2, 3].map((i) => sidOf(`o${round}-${i}`)));
    }
    expect(fences).toHaveLength(5 * 4 + 5 * 4);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
  });
});

describe('C13: a fence key holding what tonumber reads as no finite integer', () => {
  it("F = 'nan' or 'inf' (tonumber reads them as numbers): the next tokens are finite and increase, and F holds a number again", async () => {
    for (const garbage of ['nan', 'inf', '-inf']) {
      const { h, store, begin } = setUp();
      await h.redis.set(store.keys.fence, garbage);
      const [a, b] = await Promise.all([begin(sidOf('a')), begin(sidOf('b'))]);
      expect(Number.isFinite(fenceOf(a))).toBe(true);
      expect(fenceOf(b)!).toBeGreaterThan(fenceOf(a)!);
      expect(Number.isFinite(Number(await h.redis.get(store.keys.fence)))).toBe(true);
    }
  });

  it('F at 2^53 - 1 (past what a Lua number counts exactly): the call is refused with an error naming the key, and no lock is taken', async () => {
    const { h, store, begin } = setUp();
    await h.redis.set(store.keys.fence, '9007199254740991');
    const [a, b] = await Promise.allSettled([begin(sidOf('a')), begin(sidOf('b'))]);
    for (const r of [a, b]) {
      expect(r.status).toBe('rejected');
      expect(String((r as PromiseRejectedResult).reason)).toContain(`${store.keys.fence} holds 9007199254740991`);
    }
    expect(await h.redis.exists(store.keys.lock(sidOf('a')), store.keys.lock(sidOf('b')))).toBe(0);
    expect(await h.redis.get(store.keys.fence)).toBe('9007199254740991');
  });
});
