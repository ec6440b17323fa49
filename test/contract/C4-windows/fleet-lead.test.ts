import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };

describe('C4: a host whose clock runs ahead of Redis records its lead on every batch (sd:lead, PX 60 s)', () => {
  it('its start-up record gone (its TTL ran out), a batch writes it again; a larger lead of the fleet is kept', async () => {
    const h = harness();
    // a host that runs a Worker (the engine's processor in one of its own): it promotes by its clock
    expect(typeof h.engine.processor).toBe('function');
    await h.engine.waitUntilReady();
    const lead = `${h.prefix}:${h.queueName}:sd:lead`;
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await h.redis.del(lead);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      // about 6 s (the host's lead, less the time a request takes)
      expect(Number(await h.redis.get(lead))).toBeGreaterThan(5000);
      expect(await h.redis.pttl(lead)).toBeGreaterThan(0);
      // another host's larger lead stands
      await h.redis.set(lead, 9000, 'PX', 60_000);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await h.redis.get(lead)).toBe('9000');
    } finally {
      spy.mockRestore();
    }
  });

  it('a host that runs no Worker (a producer, the ops CLI) records no lead: it promotes nothing', async () => {
    const h = harness();
    const lead = `${h.prefix}:${h.queueName}:sd:lead`;
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await h.engine.waitUntilReady();
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await h.redis.exists(lead)).toBe(0);
      // then it starts a Worker: its lead is recorded before the Worker fetches
      expect(typeof h.engine.processor).toBe('function');
      await waitFor(async () => Number(await h.redis.get(lead)) > 5000, 'the lead recorded');
    } finally {
      spy.mockRestore();
    }
  });
});
