import { Queue } from 'bullmq';
import { InvalidStageRefError, MAX_STAGE_ID_LENGTH, parseStageId, stageId } from '../src';
import { readyJobId, wakeUpJobId } from '../src/job-data';
import { harness, teardown } from './helpers/engine';
import { client, closeClients, dropPrefix, isolated, keysUnder, redisOptions } from './helpers/redis';

afterEach(teardown);

describe('clause 9: keys and job ids are injective and valid for BullMQ', () => {
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

describe('bad refs are rejected with a typed error before any write', () => {
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
