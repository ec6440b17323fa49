import type { EngineEvents, EnqueueResult, StageRef } from '../../../src';
import { CMD } from '../../../src/store/client';
import { wrapBatch } from '../../helpers/faults';
import { harness } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { stageId } from '../../../src/stage-ref';

/**
 * `enqueue` with `replace: true` writes the new payload only into the stage's job that will
 * still send it: one that never began, is the stage's own, v1 and not marked; the newest
 * concurrent call wins, payload and buildId go together, and the write is confirmed on the
 * replicas like an add.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C18: replace leaves alone a job that began, or is not the stage’s to send', () => {
  const payloadOf = async (h: ReturnType<typeof harness>, id: string) => (await h.engine.queue.getJob(id))!.data;
  const delayed = (h: ReturnType<typeof harness>, id: string) =>
    waitFor(async () => (await h.engine.queue.getJobState(id)) === 'delayed', 'the job delayed again');

  it('C18: a job waiting out its retry backoff began: not replaced (payloadTaken: false)', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } } });
    h.executor.script(image, new Error('boom'));
    const { jobId } = await h.engine.enqueue(image, { v: 1 });
    h.engine.createWorker();
    await delayed(h, jobId!);
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: false });
    expect((await payloadOf(h, jobId!)).payload).toEqual({ v: 1 });
  });

  it('C18: a job re-delayed because a dispatch of its stage was in flight began: not replaced', async () => {
    const h = harness({ inFlightRetryMs: 60_000 });
    const started = latch();
    const gate = latch();
    h.executor.script(image, async () => {
      started.open();
      await gate.opened;
      throw new Error('boom');
    });
    const { jobId } = await h.engine.enqueue(image, { v: 1 });
    const direct = h.engine.dispatchStage(image, { v: 0 }).catch(() => undefined);
    await started.opened;
    h.engine.createWorker();
    await delayed(h, jobId!);
    gate.open();
    await direct;
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: false });
    expect((await payloadOf(h, jobId!)).payload).toEqual({ v: 1 });
  });

  it('C18: a waiting job marked cancelled or superseded will not send: not replaced', async () => {
    for (const mark of ['sdc', 'sds']) {
      const h = harness();
      const { jobId } = await h.engine.enqueue(image, { v: 1 });
      // (as between a cancel's mark and its removal of the job)
      await h.redis.hset(`${h.prefix}:${h.queueName}:${jobId}`, mark, 1);
      expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: false });
      expect((await payloadOf(h, jobId!)).payload).toEqual({ v: 1 });
    }
  });

  it('C18: the stage’s pending job whose data is not JSON: not replaced (payloadTaken: false)', async () => {
    const h = harness();
    const { jobId } = await h.engine.enqueue(image, { v: 1 });
    // (data written by hand, as a broken producer would)
    await h.redis.hset(`${h.prefix}:${h.queueName}:${jobId}`, 'data', 'not json');
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({
      added: false,
      jobId,
      payloadTaken: false,
    });
    expect(await h.redis.hget(`${h.prefix}:${h.queueName}:${jobId}`, 'data')).toBe('not json');
  });

  it('C18: the stage’s pending job in another wire format version: not replaced', async () => {
    const h = harness();
    // (added as a producer of another version would: BullMQ's deduplicating add under the stage id)
    const job = await h.engine.queue.add(
      'image',
      { v: 2, scope: image.scope, stage: 'image', payload: { v: 1 } } as never,
      {
        deduplication: { id: stageId(image) },
      },
    );
    const r = await h.engine.enqueue(image, { v: 2 }, { replace: true });
    expect(r).toMatchObject({ added: false, jobId: job.id, payloadTaken: false });
    expect(await payloadOf(h, job.id!)).toMatchObject({ v: 2, payload: { v: 1 } });
  });
});

describe('C18: replace writes the newest payload and buildId together, confirmed on the replicas', () => {
  it('C18: a replace whose read another replace overwrote before its write reads again and takes its payload', async () => {
    const h = harness();
    const other = harness({}, { prefix: h.prefix, queueName: h.queueName });
    await h.engine.enqueue(image, { v: 1 });
    let raced: Promise<EnqueueResult> | undefined;
    // another host's replace lands between this replace's read and its write (the write carries {v: 2})
    await wrapBatch(
      h.engine,
      (send) =>
        async (...args) => {
          if (!raced && args.some((x) => typeof x === 'string' && x.includes('"payload":{"v":2}'))) {
            raced = other.engine.enqueue(image, { v: 3 }, { replace: true });
            await raced;
          }
          return send(...args);
        },
      CMD.sdReplace,
    );
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: true });
    expect(await raced).toMatchObject({ payloadTaken: true });
    h.engine.createWorker();
    await waitFor(() => h.executor.callsFor(image) === 1, 'the job ran');
    expect(h.executor.callsOf(image)[0]!.payload).toEqual({ v: 2 });
  });

  it('C18: a replace overtaken by another replace on each of its 10 reads gives up: payloadTaken false, the last write stands', async () => {
    const h = harness();
    const { jobId } = await h.engine.enqueue(image, { v: 1 });
    const key = `${h.prefix}:${h.queueName}:${jobId}`;
    let overtaken = 0;
    // another host's replace lands between each read and its write, 9 times: every write of the 10 reads
    await wrapBatch(
      h.engine,
      (send) =>
        async (...args) => {
          if (overtaken < 9 && args.some((x) => typeof x === 'string' && x.includes('"payload":{"v":2}'))) {
            overtaken++;
            const data = JSON.parse((await h.redis.hget(key, 'data'))!) as object;
            await h.redis.hset(key, 'data', JSON.stringify({ ...data, payload: { v: 100 + overtaken } }));
          }
          return send(...args);
        },
      CMD.sdReplace,
    );
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: false });
    expect(overtaken).toBe(9);
    expect((await h.engine.queue.getJob(jobId!))!.data.payload).toEqual({ v: 109 });
  });

  it('C18: a replace without buildId drops the buildId the job had', async () => {
    const h = harness();
    await h.engine.enqueue(image, { v: 1 }, { buildId: 'b-1' });
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({ payloadTaken: true });
    h.engine.createWorker();
    await waitFor(() => h.executor.callsFor(image) === 1, 'the job ran');
    expect(h.executor.callsOf(image)[0]).toMatchObject({ payload: { v: 2 }, buildId: undefined });
  });

  it('C18: with waitForReplicas a replace that took its payload waits on the replicas (here none: a replicaLag)', async () => {
    const a = harness({ waitForReplicas: { replicas: 1, timeoutMs: 50 } });
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const lags: EngineEvents['replicaLag'][] = [];
    a.engine.on('replicaLag', (e) => lags.push(e));
    await b.engine.enqueue(image, { v: 1 });
    expect(await a.engine.enqueue(image, { v: 2 })).toMatchObject({ payloadTaken: false });
    expect(lags).toEqual([]);
    expect(await a.engine.enqueue(image, { v: 3 }, { replace: true })).toMatchObject({ payloadTaken: true });
    expect(lags).toEqual([expect.objectContaining({ op: 'enqueue', writes: 1, acked: 0, wanted: 1 })]);
  });
});
