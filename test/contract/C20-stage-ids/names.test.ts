import { stageId } from '../../../src/stage-ref';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { probe } from '../../helpers/visible';

/**
 * Inputs where the Lua `names` / `ownJob` (and the probe's twin) judge a job added by
 * hand differently from the TypeScript, which took it as the stage's own.
 */
const A = { scope: ['book-r10', 'ch-1'], stage: 'image' };
const crash = new Error('executor crashed');

/** A payload nested `n` arrays deep: JSON.stringify / JSON.parse (BullMQ, the worker) take it. */
const deep = (n: number): unknown => {
  let v: unknown = 0;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

async function handJob(jobId: string, attempts: number, payload: unknown = {}) {
  const h = harness();
  h.executor.script(A, crash);
  await h.engine.queue.add(
    'image',
    { v: 1, scope: A.scope, stage: A.stage, payload },
    {
      jobId,
      attempts,
      backoff: { type: 'fixed', delay: 60_000 },
    },
  );
  const worker = h.engine.createWorker();
  const w = watch(worker);
  await waitFor(() => w.failed.length === 1, `job ${jobId} of stage A failed`);
  return { h, w };
}

describe('C20: cjson depth (decode_max_depth 1000) vs JSON.parse', () => {
  it('deep payload: an enqueue while the hand-added job waits out its retry answers pending, as the published probe does', async () => {
    const { h } = await handJob('x-1', 3, deep(1000));
    expect(await h.engine.queue.getJobState('x-1')).toBe('delayed');
    expect(await probe(h, A)).toEqual({ kind: 'pending', jobId: 'x-1' });
    expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'x-1' });
  });

  it('deep payload: a cancel stops a retry by hand of the hand-added job that failed for good', async () => {
    const { h, w } = await handJob('x-1', 1, deep(1000));
    expect(await h.engine.queue.getJobState('x-1')).toBe('failed');
    await h.engine.cancelActiveDispatch(A);
    h.executor.fallback = SENT;
    await (await h.engine.queue.getJob('x-1'))!.retry('failed');
    await waitFor(() => w.done.some((d) => d.id === 'x-1') || w.failed.length > 1, 'x-1 ran again');
    expect(h.executor.callsFor(A)).toBe(1);
  });

  it('control, depth 998: pending as expected', async () => {
    const { h } = await handJob('x-1', 3, deep(998));
    expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'x-1' });
  });
});

describe('C20: job ids a producer may not use (ending in "!" or "?", or "<stageId>@j.<id>") are refused', () => {
  it.each([
    ['an id ending in "!"', 'x!'],
    ['an id ending in "?"', 'x?'],
    ['an id "<stageId>@j.<n>"', `${stageId(A)}@j.q1`],
  ])('%s: the job fails for good as INVALID_JOB_OPTIONS, the executor never called', async (_, id) => {
    const h = harness();
    h.executor.fallback = SENT;
    await h.engine.queue.add(
      'image',
      { v: 1, scope: A.scope, stage: A.stage, payload: {} },
      { jobId: id, attempts: 3 },
    );
    const w = watch(h.engine.createWorker());
    await waitFor(() => w.failed.length === 1, `job ${id} failed`);
    expect(w.failed[0]!.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
    expect(h.executor.calls).toHaveLength(0);
    expect(await h.engine.queue.getJobState(id)).toBe('failed');
  });
});
