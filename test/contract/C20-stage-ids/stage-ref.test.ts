import { Queue } from 'bullmq';
import fc from 'fast-check';
import { InvalidStageRefError, MAX_STAGE_ID_LENGTH, parseStageId, stageId } from '../../../src';
import { readyJobId, wakeUpJobId } from '../../../src/job-data';
import { stageIdOfJobId } from '../../../src/stage-ref';
import { harness, notSent } from '../../helpers/engine';
import { client, closeClients, dropPrefix, isolated, keysUnder, redisOptions } from '../../helpers/redis';

describe('C20: keys and job ids are injective and valid for BullMQ', () => {
  const collisions: [string[], string, string[], string][] = [
    [['a', 'b'], 'x', ['a:b'], 'x'],
    [['a|b', 'c'], 'x', ['a', 'b|c'], 'x'],
    [['a/b'], 'x', ['a', 'b'], 'x'],
    [['a'], 'b/x', ['a', 'b'], 'x'],
    [['a%2Fb'], 'x', ['a/b'], 'x'],
    [['a@b'], 'x', ['a'], 'b@x'],
  ];

  it.each(collisions)('%j/%s and %j/%s get distinct stage ids, keys and job ids', (s1, t1, s2, t2) => {
    const h = harness();
    const a = { scope: s1, stage: t1 };
    const b = { scope: s2, stage: t2 };
    expect(stageId(a)).not.toBe(stageId(b));
    expect(h.engine.deferredStageKey(a)).not.toBe(h.engine.deferredStageKey(b));
    const chain = { capacity: 1, idempotent: 0, failures: 0 };
    expect(wakeUpJobId(stageId(a), 'capacity', chain, 1).split('@')[0]).not.toBe(
      wakeUpJobId(stageId(b), 'capacity', chain, 1).split('@')[0],
    );
  });

  it('round-trips any ref through its stage id', () => {
    const ref = { scope: ['bö:k', '{x}', '%', '|', '🎬'], stage: 'im age/1' };
    expect(parseStageId(stageId(ref))).toEqual(ref);
  });

  it('gives readable ids for plain names', () => {
    expect(stageId({ scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' })).toBe('book-1/ch-2/sc-7/image');
  });

  it('puts every key under the prefix, in the queue namespace', () => {
    const h = harness();
    expect(h.engine.deferredStageKey({ scope: ['a'], stage: 'b' })).toBe(`${h.prefix}:${h.queueName}:sd:deferred:a/b`);
  });

  it('makes job ids BullMQ accepts, for digits, colons and braces', async () => {
    const { prefix, queueName } = isolated();
    const queue = new Queue(queueName, { connection: redisOptions(), prefix });
    const redis = client();
    try {
      for (const scope of [['1'], ['0'], ['1', '2'], ['a:b:c'], ['{t}'], ['0:x']]) {
        const sid = stageId({ scope, stage: '7' });
        for (const id of [
          wakeUpJobId(sid, 'capacity', { capacity: 1, idempotent: 0, failures: 0 }, Date.now()),
          readyJobId(sid),
        ]) {
          expect(id).not.toMatch(/:/);
          expect(id).not.toMatch(/^\d+$/);
          const job = await queue.add('image', {}, { jobId: id, delay: 60_000 });
          expect(job.id).toBe(id);
        }
      }
    } finally {
      await queue.close();
      await dropPrefix(redis, prefix);
      await closeClients();
    }
  });
});

describe('C20: bad refs are rejected with a typed error before any write', () => {
  const bad: [string, unknown][] = [
    ['no scope', { scope: [], stage: 'image' }],
    ['scope not an array', { scope: 'book', stage: 'image' }],
    ['empty segment', { scope: ['book', ''], stage: 'image' }],
    ['non-string segment', { scope: ['book', 7], stage: 'image' }],
    ['empty stage', { scope: ['book'], stage: '' }],
    ['non-string stage', { scope: ['book'], stage: null }],
    ['nine segments', { scope: ['1', '2', '3', '4', '5', '6', '7', '8', '9'], stage: 'image' }],
    ['over-long encoded id', { scope: ['🎬'.repeat(60)], stage: 'image' }],
    ['lone surrogate', { scope: ['\uD800'], stage: 'image' }],
    ['not an object', null],
  ];

  it.each(bad)('%s', async (_what, ref) => {
    const h = harness();
    expect(() => stageId(ref as never)).toThrow(InvalidStageRefError);
    await expect(h.engine.dispatchStage(ref as never, {})).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.enqueue(ref as never, {})).rejects.toBeInstanceOf(InvalidStageRefError);
    await expect(h.engine.isStageDeferred(ref as never)).rejects.toBeInstanceOf(InvalidStageRefError);
    await expect(h.engine.cancelActiveDispatch(ref as never)).rejects.toBeInstanceOf(InvalidStageRefError);
    expect(h.executor.calls).toHaveLength(0);
    const written = (await keysUnder(h.redis, h.prefix)).filter((k) => !k.endsWith(':meta'));
    expect(written).toEqual([]);
  });

  it('bounds the encoded form at MAX_STAGE_ID_LENGTH', () => {
    expect(() => stageId({ scope: ['a'.repeat(MAX_STAGE_ID_LENGTH - 2)], stage: 'b' })).not.toThrow();
    expect(() => stageId({ scope: ['a'.repeat(MAX_STAGE_ID_LENGTH - 1)], stage: 'b' })).toThrow(/at most 512/);
  });
});

describe('C20: a stage id never contains `@` (job ids are split on the first `@`), nor `:`, `{`, `}`, `|`', () => {
  const special = fc.constantFrom('@', ':', '{', '}', '|', '/', '%', '\\', '\0', '🎬');
  /** One UTF-16 unit (lone surrogates included), one code point (astral included), or a separator. */
  const unit = fc.oneof(
    special,
    fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  );
  const segment = fc.string({ unit, minLength: 0, maxLength: 12 });
  const refs = fc.record({ scope: fc.array(segment, { minLength: 0, maxLength: 9 }), stage: segment });

  it('for arbitrary Unicode scope and stage, the id (when accepted) holds none of them and job ids split back to it', () => {
    let accepted = 0;
    fc.assert(
      fc.property(refs, (ref) => {
        let id: string;
        try {
          id = stageId(ref);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidStageRefError);
          return;
        }
        accepted += 1;
        expect({ ref, id, forbidden: id.match(/[@:{}|]/g) }).toEqual({ ref, id, forbidden: null });
        const chain = { capacity: 1, idempotent: 0, failures: 0 };
        expect(stageIdOfJobId(wakeUpJobId(id, 'capacity', chain, Date.now()))).toBe(id);
        expect(stageIdOfJobId(readyJobId(id))).toBe(id);
        expect(parseStageId(id)).toEqual(ref);
      }),
      { numRuns: 1000 },
    );
    expect(accepted).toBeGreaterThan(100); // the property was checked on accepted refs, not only on rejections
  });

  it("a scope segment 'a@b' deferred is listed by listDeferred(['a@b']) and cleared by clearDeferrals(['a@b'])", async () => {
    const h = harness();
    const ref = { scope: ['a@b'], stage: 'image' };
    const neighbour = { scope: ['a'], stage: 'b@image' };
    h.executor.fallback = notSent('no_worker_available');
    for (const r of [ref, neighbour]) {
      expect(await h.engine.dispatchStage(r, {})).toMatchObject({
        reason: 'no_worker_available',
        until: expect.any(Number),
      });
    }
    const listed = await h.engine.listDeferred(['a@b']);
    expect(listed.map((d) => d.ref)).toEqual([ref]);
    expect(listed[0]!.wakeUpJobId.startsWith(`${stageId(ref)}@cap.1.`)).toBe(true);
    expect(await h.engine.clearDeferrals(['a@b'])).toBe(1);
    expect(await h.engine.isStageDeferred(ref)).toBe(false);
    expect(await h.engine.isStageDeferred(neighbour)).toBe(true);
    expect((await h.engine.listDeferred(['a'])).map((d) => d.ref)).toEqual([neighbour]);
  });
});
