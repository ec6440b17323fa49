import { type StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C11: the job's own retry options govern it, whichever engine runs it", () => {
  it('a job a producer added with attempts 4 gets 4 on a worker engine configured with 2; its wake-up inherits them', async () => {
    const producer = harness({ retry: { attempts: 4, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
    const worker = harness(
      { retry: { attempts: 2, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } },
      { prefix: producer.prefix, queueName: producer.queueName },
    );
    // a capacity answer first (the wake-up inherits the job's options), then real failures only
    worker.executor.script(image, notSent('no_worker_available'));
    worker.executor.fallback = notSent('send_failed');
    const deferred: string[] = [];
    worker.engine.on('deferred', (e) => deferred.push(e.wakeUpJobId));
    await producer.engine.enqueue(image, {});
    const { failed } = watch(worker.engine.createWorker());
    await waitFor(() => failed.some((f) => f.error.name === 'UnrecoverableError'), 'failed for good');
    const wakeUp = await worker.engine.queue.getJob(deferred[0]!);
    expect(wakeUp!.opts.attempts).toBe(4);
    // 1 capacity answer + 4 real failures, not 2
    expect(worker.executor.calls).toHaveLength(5);
    expect(producer.executor.calls).toHaveLength(0);
  });
});
