import { stageId, type StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * The lock of a running executor is renewed every third of `lockMs` (docs/contract.md, C12), so
 * a lock always has two thirds of its life left after a renewal, and a renewal that is late or
 * lost once still leaves the next one in time. Each renewal sets the lock's TTL back to `lockMs`:
 * the lock's expiry on Redis' clock (`TIME` + `PTTL`, read in one script) moves forward once
 * per renewal, by the time between two renewals as Redis saw them. The executor is held until
 * enough renewals were seen, however long a loaded machine takes; what is asserted is the
 * cadence: a renewal every third of lockMs (1 s with lockMs 3 s), under 0.45 × lockMs, clear of
 * a renewal every half (1.5 s), which leaves a renewal late or lost once no margin.
 */
const image: StageRef = { scope: ['book-33', 'ch-1', 'sc-1'], stage: 'image' };
const LOCK_MS = 3000;
const RENEWALS = 6;
/** The lock's expiry on Redis' clock, ms, or -1 while the key is missing. */
const EXPIRY = `local t = redis.call('TIME')
local p = redis.call('PTTL', KEYS[1])
if p < 0 then return -1 end
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + p`;

describe('C12: the lock of a running executor is renewed every third of lockMs', () => {
  it('with lockMs 3000 the lock is renewed about every second (a renewal every half would be every 1.5 s), and never goes missing', async () => {
    const gate = latch();
    let signal: AbortSignal | undefined;
    const h = harness({
      lockMs: LOCK_MS,
      executor: async (_ref, _payload, ctx) => {
        signal = ctx.signal;
        await gate.opened;
        return SENT;
      },
    });
    const first = h.engine.dispatchStage(image, {});
    // (the executor is let go whatever happens: close() waits for it)
    try {
      await waitFor(() => signal !== undefined, 'the executor to start');
      const lock = `${h.prefix}:${h.queueName}:sd:inflight:${stageId(image)}`;
      // every distinct expiry seen: the lock's take (or a renewal, if the first read came late),
      // then one per renewal
      const expiries: number[] = [];
      let missing = 0;
      await waitFor(
        async () => {
          const at = Number(await h.redis.eval(EXPIRY, 1, lock));
          if (at < 0) missing += 1;
          // (two reads of one expiry differ by a millisecond of rounding at most)
          else if (expiries.length === 0 || at > expiries.at(-1)! + 50) expiries.push(at);
          return missing > 0 || expiries.length > RENEWALS;
        },
        `${RENEWALS} renewals of the lock`,
        60_000,
      );
      expect(missing).toBe(0);
      // the time between two renewals as Redis saw them (the first expiry, set at an arbitrary
      // point of the renewal cycle, is left out); their median, so that a renewal a late read
      // missed (one gap of two cycles) or a renewal sent late (a long gap, then a short one) does
      // not decide
      const renewals = expiries.slice(1);
      const gaps = renewals
        .slice(1)
        .map((at, i) => at - renewals[i]!)
        .sort((a, b) => a - b);
      const median = gaps[Math.floor(gaps.length / 2)]!;
      expect({
        gaps: gaps.length,
        median,
        underHalf: median < LOCK_MS * 0.45,
        aThird: median > LOCK_MS / 3 - 100,
      }).toEqual({
        gaps: RENEWALS - 1,
        median,
        underHalf: true,
        aThird: true,
      });
      // renewed, neither lost nor cancelled: the executor runs on and its answer stands
      expect(signal!.aborted).toBe(false);
    } finally {
      gate.open();
    }
    expect(await first).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
  }, 90_000);
});
