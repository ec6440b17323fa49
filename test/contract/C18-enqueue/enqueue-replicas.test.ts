import type { EngineEvents } from '../../../src';
import { harness } from '../../helpers/engine';

/**
 * Behaviours of src/bullmq/producer.ts that Stryker's mutants showed
 * unguarded (docs/testing.md, "Surviving mutants"): each test here fails
 * with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };
const text = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'text' };

describe('C18: an enqueue with waitForReplicas', () => {
  it('waits on the replicas for a job it added, and only then (here no replica answers: a replicaLag each time it waits)', async () => {
    // no replica exists: every WAIT comes back short and is reported as replicaLag (then WAIT pauses for 10 x 50 ms)
    const a = harness({ waitForReplicas: { replicas: 1, timeoutMs: 50 } });
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const lags: EngineEvents['replicaLag'][] = [];
    a.engine.on('replicaLag', (e) => lags.push(e));
    // the stage's job was added by another producer: this enqueue adds nothing, so it waits for nothing
    expect(await b.engine.enqueue(image, {})).toMatchObject({ added: true });
    expect(await a.engine.enqueue(image, {})).toMatchObject({ added: false, reason: 'pending' });
    expect(lags).toEqual([]);
    // a job it adds: the enqueue returns after its WAIT
    expect(await a.engine.enqueue(text, {})).toMatchObject({ added: true });
    expect(lags).toEqual([expect.objectContaining({ op: 'enqueue', writes: 1, acked: 0, wanted: 1 })]);
  });

  it("rejects with Redis' own error when Redis refuses the probe (a marker key of another type: WRONGTYPE), as without it", async () => {
    for (const h of [harness({ waitForReplicas: { replicas: 1, timeoutMs: 10 } }), harness()]) {
      await h.redis.hset(h.engine.deferredStageKey(image), 'not', 'a marker');
      await expect(h.engine.enqueue(image, {})).rejects.toThrow(/WRONGTYPE/);
      expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toEqual({ wait: 0, delayed: 0 });
    }
  });
});
