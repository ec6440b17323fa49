import { join } from 'node:path';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fleetClockLead } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import { promotedByClockAhead, spawnAheadHost } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Docs/design.md, "Clocks": "every engine host that runs a Worker ... records its lead
 * over Redis' clock ... whenever a batch measures a larger one, and keeps its record alive while
 * it runs: an idle host, its worker still promoting by its clock (every stage deferred in an
 * outage), sends a batch of no operation every 20 s"; a wake-up promoted early by a clock ahead
 * "is delayed for the rest (no attempt spent)".
 *
 * The idle host's refresh timer (src/deferral-store.ts, promotesWakeUps) only sends its batch
 * when the lead it last measured is over 50 ms; an idle host measures nothing but by that batch.
 * So a host whose clock was in step when its engine started (lead 0, nothing recorded) and then
 * runs ahead (an NTP step, a VM resumed, drift over an idle outage) never measures again while it
 * runs no attempt, and records nothing, while its Worker promotes wake-ups by the new clock.
 * Another host then runs such a wake-up 5.5 s inside its window, taking it for a Promote.
 *
 * Host A is a child process (preload clock-steps.cjs: in step at start, 6 s ahead once signalled)
 * running test/helpers/ahead-host.ts (a dispatch engine and a Worker, not started); its Worker's
 * fetch is this test's own BullMQ Worker fetching by A's clock, as a test.
 */
const image: StageRef = { scope: ['book-35', 'step'], stage: 'image' };

describe('C4: an idle fleet host whose clock steps ahead after its engine started', () => {
  it('a wake-up promoted early by an idle host whose clock stepped 6 s ahead is not dispatched inside its window', async () => {
    const real = Date.now.bind(Date);
    const h = harness({ windows: { capacitySeconds: 40, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    let until = 0;
    h.engine.on('deferred', (e) => (until = e.until));
    await h.engine.dispatchStage(image, {});
    // another job of the queue, older than the wake-up: host A's next fetch takes it
    await h.engine.queue.add('other', { v: 1, scope: ['x'], stage: 'other', payload: {} });

    const hostA = await spawnAheadHost(h, join(__dirname, '..', '..', 'helpers', 'clock-steps.cjs'));
    try {
      // in step at its start: nothing to record
      expect(await fleetClockLead(h.redis, h)).toBeNull();
      // host A's clock steps 6 s ahead; idle, it then has its 20 s refresh
      hostA.child.kill('SIGUSR2');
      await waitFor(() => hostA.said().includes('stepped'), 'host A stepped', 5000);
      const startedA = real();
      await waitFor(
        () => real() >= Math.max(until - 5500, startedA + 22_000),
        'about 5.5 s before the window ends',
        40_000,
      );
      expect(real()).toBeLessThan(until - 5000);
      // what host A recorded for the fleet by now
      const recorded = await fleetClockLead(h.redis, h);
      // host A's worker promotes the wake-up by its clock; host B, right clock, runs it
      const { result, calledAt } = await promotedByClockAhead(h, real);
      expect(result).toMatchObject({ dispatched: true });
      // Redis and this machine share a clock: not before the window's end
      expect({ recorded: (recorded ?? 0) > 5000, early: calledAt < until }).toEqual({
        recorded: true,
        early: false,
      });
    } finally {
      hostA.kill();
    }
  }, 90_000);
});
