import { cliWithClock } from '../helpers/cli-clock';
import { harness, notSent } from '../helpers/engine';
import { redisOptions } from '../helpers/redis';
import type { StageRef } from '../../src';

/**
 * Path: every `until` is on Redis' clock: `deferredStage`
 * (src/store/listing.ts:22) now gives the wake-up id's `until` (`lic.until`) instead of
 * `now + PTTL`. The CLI still turns it into "time left" with the clock of the machine it runs
 * on: `deferredJson` (src/cli/output.ts:25, `remainingMs: Math.max(0, d.until - now)`) and
 * `listTable` (output.ts:39, the IN column) with `now = Date.now()` (src/cli.ts:121, and
 * `show`, src/cli.ts:146). Before, `until - now` was the marker's PTTL whatever the local
 * clock said; now an operator's laptop (or a bastion) whose clock is two minutes behind
 * Redis' reads a 30 s window as 2.5 minutes left, and one whose clock runs ahead reads 0 for
 * a stage that is still deferred.
 *
 * Expected (README: the marker's TTL is the "remaining window"; `list` prints "until" and how
 * long is left; the `until` values "on Redis' clock, the fleet's common one"): `remainingMs`
 * is the time left on the deferral by Redis' clock, about the window (30 s) right after the
 * deferral, whatever the CLI host's clock. What happens: it is off by the CLI host's clock
 * offset (here: ~150 s for a 30 s window, the host 2 minutes behind).
 */
const image: StageRef = { scope: ['book-28', 'cli'], stage: 'image' };
describe('C29: the CLI on a host whose clock is off', () => {
  it("`list --json` on a machine whose clock is 2 minutes behind Redis' says a 30 s deferral has at most 30 s left (it said 150 s)", async () => {
    const h = harness({ windows: { capacitySeconds: 30, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r.reason).toBe('no_worker_available');
    const { host, port } = redisOptions();
    const out = await cliWithClock(-120_000, [
      '--redis',
      `redis://${host}:${port}`,
      '--queue',
      h.queueName,
      '--prefix',
      h.prefix,
      '--json',
      'list',
    ]);
    expect(out.stderr).toBe('');
    const rows = JSON.parse(out.stdout) as { remainingMs: number }[];
    expect(rows).toHaveLength(1);
    // about the window: a few seconds for the CLI's start-up at most
    expect(rows[0]!.remainingMs).toBeGreaterThan(20_000);
    expect(rows[0]!.remainingMs).toBeLessThanOrEqual(30_000);
  }, 40_000);
});
