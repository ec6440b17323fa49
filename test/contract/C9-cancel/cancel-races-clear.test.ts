import type { StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { queued, watch } from '../../helpers/members';
import { FREE, stageView } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C9: a cancel racing a clear of its scope', () => {
  it('either cancelled (no dispatch) or woken once; nothing left behind', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const { done } = watch(h.engine.createWorker());
    await Promise.all([h.engine.clearDeferrals(['book-1']), h.engine.cancelActiveDispatch(image)]);
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(h.executor.calls.length).toBeLessThanOrEqual(2);
    expect(done.length).toBeLessThanOrEqual(1);
    expect(await stageView(h.engine, image)).toEqual(FREE);
    // nothing holds the stage: an enqueue adds its job, which asks the executor
    const calls = h.executor.calls.length;
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    await waitFor(() => h.executor.calls.length === calls + 1, 'the enqueued job to run');
  });
});
