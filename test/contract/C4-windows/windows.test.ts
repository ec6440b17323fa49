import { Job } from 'bullmq';
import { CLOCK_ESTIMATE_SLACK_MS, harness, notSent } from '../../helpers/engine';

const refs = (n: number) => Array.from({ length: n }, (_, i) => ({ scope: ['book-1', `sc-${i}`], stage: 'image' }));

describe('C4: jitter shortens windows, never lengthens them', () => {
  it('with jitter 0.5 over 30 deferrals, windows spread over [50 %, 100 %] of 10 s and never exceed it', async () => {
    const h = harness({ windows: { capacitySeconds: 10, jitter: 0.5 } });
    h.executor.fallback = notSent('no_worker_available');
    const windows: number[] = [];
    const pttls: number[] = [];
    for (const ref of refs(30)) {
      await h.engine.dispatchStage(ref, {});
      pttls.push(await h.redis.pttl(h.engine.deferredStageKey(ref)));
      const [d] = await h.engine.listDeferred(ref.scope);
      // the wake-up's delay is the window exactly (no clock involved)
      windows.push((await Job.fromId(h.engine.queue, d!.wakeUpJobId))!.delay);
    }
    for (const [i, w] of windows.entries()) {
      expect({ i, w, inRange: w >= 5000 && w <= 10_000 }).toEqual({ i, w, inRange: true });
      // the marker's PTTL is the window, counting down: never more than it (but for the clock estimate's
      // error, expectWindowLeft), never more than 10 s
      const ok = pttls[i]! > 0 && pttls[i]! <= w + CLOCK_ESTIMATE_SLACK_MS;
      expect({ i, pttl: pttls[i], ok }).toEqual({ i, pttl: pttls[i], ok: true });
    }
    expect(Math.max(...pttls)).toBeLessThanOrEqual(10_000 + CLOCK_ESTIMATE_SLACK_MS);
    // spread: 30 uniform draws over 5 s almost surely span more than 1 s and rarely repeat
    expect(Math.max(...windows) - Math.min(...windows)).toBeGreaterThan(1000);
    expect(Math.max(...pttls) - Math.min(...pttls)).toBeGreaterThan(1000);
    expect(new Set(windows).size).toBeGreaterThan(20);
  });
});

describe('C4: the documented default windows', () => {
  it('with no `windows` option, capacity is 30 s and idempotent 300 s, shortened by at most the default 20 % jitter', async () => {
    const h = harness({ windows: undefined });
    const [cap, idem] = refs(2);
    h.executor.script(cap!, notSent('no_worker_available'));
    h.executor.script(idem!, notSent('already_completed'));
    await h.engine.dispatchStage(cap!, {});
    await h.engine.dispatchStage(idem!, {});
    const capPttl = await h.redis.pttl(h.engine.deferredStageKey(cap!));
    const idemPttl = await h.redis.pttl(h.engine.deferredStageKey(idem!));
    expect(capPttl).toBeGreaterThan(0.8 * 30_000);
    expect(capPttl).toBeLessThanOrEqual(30_000);
    expect(idemPttl).toBeGreaterThan(0.8 * 300_000);
    expect(idemPttl).toBeLessThanOrEqual(300_000);
  });
});
