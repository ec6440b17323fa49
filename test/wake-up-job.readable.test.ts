import { createDispatchEngine, type DispatchEngine } from '../src';
import { client, closeClients, dropPrefix, isolated, waitFor } from './helpers/redis';

const { prefix, queueName } = isolated();
let engine: DispatchEngine;

beforeAll(() => {
  engine = createDispatchEngine({
    connection: client(),
    prefix,
    queueName,
    windows: { capacitySeconds: 0.3, jitter: 0 },
    executor: async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
    // hold the chain still at its second deferral, so the test can read that wake-up
    journal: async (_ref, event) => {
      if (event.deferrals === 2) await engine.queue.pause();
    },
  });
});

afterAll(async () => {
  await engine.close();
  await dropPrefix(client(), prefix);
  await closeClients();
});

describe('the wake-up job of a re-deferred stage', () => {
  it('is a new delayed job whose data and log line carry the deferral count', async () => {
    const ref = { scope: ['book-1', 'ch-1'], stage: 'video' };
    engine.createWorker({ concurrency: 1 });
    await engine.dispatchStage(ref, null);
    const second = await waitFor(async () => {
      const [d] = await engine.listDeferred(['book-1']);
      return d && d.deferrals === 2 && (await engine.queue.isPaused()) ? d : null;
    }, 'a second deferral');
    const job = (await engine.queue.getJob(second.wakeUpJobId))!;
    expect(job.name).toBe('video');
    expect(job.id).toMatch(new RegExp(`^book-1/ch-1/video@cap\\.${second.deferrals}\\.0\\.0\\.`));
    expect(job.data).toMatchObject({ reason: 'no_worker_available', class: 'capacity', deferrals: second.deferrals });
    const { logs } = await engine.queue.getJobLogs(second.wakeUpJobId);
    expect(logs).toEqual([expect.stringMatching(new RegExp(`deferred #${second.deferrals} \\(capacity\\)`))]);
  });
});

describe('promoting a wake-up job by hand (Bull Board "Promote")', () => {
  const own = isolated();
  let e: DispatchEngine;
  afterAll(async () => {
    await e?.close();
    await dropPrefix(client(), own.prefix);
  });

  it('dispatches the stage now, ending its deferral', async () => {
    const calls: string[] = [];
    e = createDispatchEngine({
      connection: client(),
      ...own,
      windows: { capacitySeconds: 300 },
      executor: async () => {
        calls.push('call');
        return calls.length === 1
          ? { dispatched: false, jobs: 0, reason: 'no_worker_available' }
          : { dispatched: true, jobs: 1, reason: null };
      },
    });
    const ref = { scope: ['book-2'], stage: 'image' };
    await e.dispatchStage(ref, null);
    const [d] = await e.listDeferred();
    e.createWorker();
    await (await e.queue.getJob(d!.wakeUpJobId))!.promote();
    await waitFor(() => calls.length === 2, 'the promoted wake-up to dispatch');
    await waitFor(async () => !(await e.isStageDeferred(ref)), 'the deferral to end');
    expect(await e.listDeferred()).toEqual([]);
  });
});
