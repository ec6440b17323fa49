import { harness } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { redisNow } from '../../helpers/observe';
import type { EngineEvents, StageRef } from '../../../src';

/**
 * One clock: windows and wake-ups are on Redis' clock, and a Worker host whose clock leads
 * Redis' by more than `maxClockSkewMs` is not compensated (its Worker promotes wake-ups that
 * early, and one promoted past the tolerance runs as an operator's Promote would): it is
 * reported, `clockSkew` with the lead the engine measured and the limit, at start-up and when a
 * later reading crosses the limit (not at every reading past it).
 */
const image: StageRef = { scope: ['book-skew', 'ch-1'], stage: 'image' };

afterEach(() => jest.restoreAllMocks());

/** This process's clock `ms` ahead of Redis' (this machine's). */
function ahead(ms: number) {
  const real = Date.now.bind(Date);
  return jest.spyOn(Date, 'now').mockImplementation(() => real() + ms);
}

function skewsOf(h: ReturnType<typeof harness>): EngineEvents['clockSkew'][] {
  const skews: EngineEvents['clockSkew'][] = [];
  h.engine.on('clockSkew', (e) => skews.push(e));
  return skews;
}

describe("C4: a Worker host whose clock leads Redis' by more than maxClockSkewMs is reported", () => {
  it('at start-up: one clockSkew event with the measured lead and the limit; later readings past it add none', async () => {
    // started early in one of Redis' seconds (its ms 200-600): a start-up reading that lost or
    // mis-scaled the ms of Redis' time would be off by more than the 200 ms the lead is read to
    const redis = client();
    await waitFor(async () => {
      const ms = (await redisNow(redis)) % 1000;
      return ms >= 200 && ms < 600;
    }, "Redis' ms 200-600");
    ahead(4000);
    const h = harness();
    const skews = skewsOf(h);
    const worker = h.engine.createWorker({ autorun: false });
    try {
      await waitFor(() => skews.length === 1, 'the clockSkew event at start-up');
      expect(skews[0]).toEqual({ leadMs: expect.any(Number), maxClockSkewMs: 1000 });
      expect(Math.abs(skews[0]!.leadMs - 4000)).toBeLessThan(200);
      expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
      expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
      expect(skews).toHaveLength(1);
    } finally {
      await worker.close();
    }
  });

  it('a later reading that crosses the limit is reported once; back in step, then ahead again, once more', async () => {
    const h = harness({ maxClockSkewMs: 2000 });
    const skews = skewsOf(h);
    expect(typeof h.engine.processor).toBe('function'); // a Worker of the host's own runs it
    await h.engine.waitUntilReady();
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(skews).toEqual([]);
    // the host's clock steps 3 s ahead (an NTP step, a VM resumed)
    const step = ahead(3000);
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(skews).toEqual([{ leadMs: expect.any(Number), maxClockSkewMs: 2000 }]);
    expect(skews[0]!.leadMs).toBeGreaterThan(2000);
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(skews).toHaveLength(1);
    step.mockRestore();
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(skews).toHaveLength(1);
    ahead(3000);
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(skews).toHaveLength(2);
  });

  it('a host within maxClockSkewMs, or one that runs no Worker (a producer, the ops CLI), is not reported', async () => {
    ahead(4000);
    const within = harness({ maxClockSkewMs: 5000 });
    const producer = harness();
    const skews = [...[within, producer].map(skewsOf)];
    expect(typeof within.engine.processor).toBe('function');
    for (const h of [within, producer]) {
      await h.engine.waitUntilReady();
      expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    }
    expect(skews).toEqual([[], []]);
  });
});
