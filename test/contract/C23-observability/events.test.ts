import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const video = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'video' };

describe('C23: engine events', () => {
  it('a throwing listener does not break a dispatch, nor keep later listeners from hearing it', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    const heard: string[] = [];
    for (const name of ['deferred', 'dispatched', 'suppressed'] as const) {
      h.engine.on(name, () => {
        throw new Error(`listener of ${name} exploded`);
      });
      h.engine.on(name, () => heard.push(name));
    }
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'no_worker_available', retryable: true });
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'deferred_capacity', deferred: true });
    expect(await h.engine.dispatchStage(video, {})).toMatchObject({ dispatched: true });
    expect(heard).toEqual(['deferred', 'suppressed', 'dispatched']);
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it('`woken` is emitted when a wake-up job starts its stage, and only then', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    const woken: { ref: unknown; jobId: string }[] = [];
    h.engine.on('woken', (e) => woken.push(e));
    const deferred: string[] = [];
    h.engine.on('deferred', (e) => deferred.push(e.wakeUpJobId));
    await h.engine.dispatchStage(video, {}); // a direct dispatch: not a wake-up
    await h.engine.enqueue(image, {});
    h.engine.createWorker();
    await waitFor(() => h.executor.callsFor(image) === 2, 'the wake-up to dispatch');
    expect(deferred).toHaveLength(1);
    expect(woken).toEqual([{ ref: image, jobId: deferred[0] }]);
  });

  it('`once` hears one event, `on` every one; both chain', async () => {
    const h = harness();
    const once: unknown[] = [];
    const every: unknown[] = [];
    expect(h.engine.once('dispatched', (e) => once.push(e.ref)).on('dispatched', (e) => every.push(e.ref))).toBe(
      h.engine,
    );
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(video, {});
    expect(once).toEqual([image]);
    expect(every).toEqual([image, video]);
  });

  it('`off` stops a listener, and chains', async () => {
    const h = harness();
    const heard: unknown[] = [];
    const listener = (e: { ref: unknown }) => heard.push(e.ref);
    h.engine.on('dispatched', listener);
    await h.engine.dispatchStage(image, {});
    expect(h.engine.off('dispatched', listener)).toBe(h.engine);
    await h.engine.dispatchStage(video, {});
    expect(heard).toEqual([image]);
  });
});

describe('C23: jobLog', () => {
  it('`jobLog: false` (the default) writes no log list for the wake-up; `jobLog: true` one line', async () => {
    const quiet = harness();
    const loud = harness({ jobLog: true });
    for (const h of [quiet, loud]) h.executor.script(image, notSent('no_worker_available'));
    const logsOf = async (h: typeof quiet) => {
      await h.engine.dispatchStage(image, {});
      const [d] = await h.engine.listDeferred(['book-1']);
      expect(d).toBeDefined();
      return h.redis.lrange(`${h.prefix}:${h.queueName}:${d!.wakeUpJobId}:logs`, 0, -1);
    };
    expect(await logsOf(quiet)).toEqual([]);
    expect(
      await quiet.redis.exists(
        `${quiet.prefix}:${quiet.queueName}:${(await quiet.engine.listDeferred())[0]!.wakeUpJobId}:logs`,
      ),
    ).toBe(0);
    expect(await logsOf(loud)).toEqual([expect.stringMatching(/deferred #1 \(capacity\): no_worker_available/)]);
  });
});
