import { join } from 'node:path';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fleetClockLead } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import { promotedByClockAhead, spawnAheadHost } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Path: a host's clock lead over Redis is recorded in `sd:lead` with PX 60 s, at its
 * engine's start (src/deferral-store.ts:136-138) and by a batch that measures a larger
 * lead than the one stored (src/lua/scripts.ts:261-265). Nothing renews it while the
 * host runs no attempt, yet its Worker keeps promoting delayed jobs by its clock. That
 * is exactly the situation a capacity outage makes: every stage deferred, the workers
 * idle for longer than a minute. Then the host (6 s ahead) fetches its next job: BullMQ
 * promotes the due wake-up by that clock, 6 s early, and another host with a right
 * clock takes it; its begin (tolerance = `maxClockSkewMs` + `fleetLead()`, which now
 * reads no `sd:lead`) finds more than the tolerance left on the marker, takes it for
 * Bull Board's Promote, and dispatches the stage inside its window. a fix
 * (test/contract/C4-windows/fleet-clock.test.ts) holds only during the first minute after the
 * ahead host's engine started.
 *
 * Expected (docs/design.md, "Clocks"): "Any host's worker may promote the wake-up and
 * another host may run it, so the lead that counts is the fleet's: every engine host
 * records its lead over Redis' clock ... when it starts, before its worker fetches
 * anything"; a wake-up promoted early by a clock ahead "is delayed for the rest (no
 * attempt spent)". What happens: the stage is dispatched ~5 s inside its window.
 */
const image: StageRef = { scope: ['book-27', 'idle'], stage: 'image' };

describe('C4: a fleet host whose clock runs ahead, idle for over a minute', () => {
  it('after a minute without dispatches, a wake-up promoted early by a host whose clock runs ahead is dispatched inside its window', async () => {
    const real = Date.now.bind(Date);
    const h = harness({ windows: { capacitySeconds: 67, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    let until = 0;
    h.engine.on('deferred', (e) => (until = e.until));
    await h.engine.dispatchStage(image, {});
    // another job of the queue, older than the wake-up: host A's next fetch takes it
    await h.engine.queue.add('other', { v: 1, scope: ['x'], stage: 'other', payload: {} });

    // host A (a process whose clock runs 6 s ahead of Redis') starts its engine: its lead is
    // recorded for the fleet
    const hostA = await spawnAheadHost(h, join(__dirname, '..', '..', 'helpers', 'clock-ahead.cjs'));
    try {
      expect(await fleetClockLead(h.redis, h)).toBeGreaterThan(5000);

      // the outage goes on: no host dispatches anything for over a minute (the record's own
      // time); host A, idle, keeps its lead recorded
      await waitFor(() => real() >= until - 5500, 'about 5.5 s before the window ends', 70_000);
      expect(await fleetClockLead(h.redis, h)).toBeGreaterThan(5000);
      await wakeUpPromotedEarly(h, real, until);
    } finally {
      hostA.kill();
    }
  }, 100_000);
});

/** Host A's worker promotes the due wake-up by its clock (6 s ahead); host B runs it. */
async function wakeUpPromotedEarly(h: ReturnType<typeof harness>, real: () => number, until: number): Promise<void> {
  const { result, calledAt } = await promotedByClockAhead(h, real);
  expect(result).toMatchObject({ dispatched: true });
  // Redis and this machine share a clock: not before the window's end
  expect(calledAt).toBeGreaterThanOrEqual(until);
}
