import { harness } from '../../helpers/engine';
import { fleetClockLead, fleetClockLeadPttl, setFleetClockLead } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. No public view shows the fleet's lead (its effect takes a host whose clock leads and a
 * window's wait: see idle-lead-*.test.ts): it is read through named internal helpers.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };

describe('C4: a host whose clock runs ahead of Redis records its lead on every batch (kept 60 s)', () => {
  it('its start-up record gone (its TTL ran out), a batch writes it again; a larger lead of the fleet is kept', async () => {
    const h = harness();
    // a host that runs a Worker (the engine's processor in one of its own): it promotes by its clock
    expect(typeof h.engine.processor).toBe('function');
    await h.engine.waitUntilReady();
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await setFleetClockLead(h.redis, h, null);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      // about 6 s (the host's lead, less the time a request takes)
      expect(await fleetClockLead(h.redis, h)).toBeGreaterThan(5000);
      expect(await fleetClockLeadPttl(h.redis, h)).toBeGreaterThan(0);
      // another host's larger lead stands
      await setFleetClockLead(h.redis, h, 9000);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await fleetClockLead(h.redis, h)).toBe(9000);
    } finally {
      spy.mockRestore();
    }
  });

  it('a host that runs no Worker (a producer, the ops CLI) records no lead: it promotes nothing', async () => {
    const h = harness();
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await h.engine.waitUntilReady();
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await fleetClockLead(h.redis, h)).toBeNull();
      // then it starts a Worker: its lead is recorded before the Worker fetches
      expect(typeof h.engine.processor).toBe('function');
      await waitFor(async () => ((await fleetClockLead(h.redis, h)) ?? 0) > 5000, 'the lead recorded');
    } finally {
      spy.mockRestore();
    }
  });
});
