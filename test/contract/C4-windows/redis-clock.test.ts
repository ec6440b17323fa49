import { RedisClock } from '../../../src/store/clock';

/**
 * Redis' clock as a host reads it (src/store/clock.ts), pure: no Redis. Each reading bounds the
 * offset between Redis' time less the receive time and Redis' time less the send time; the
 * estimate is the middle of the tightest bounds the readings agree on (a reply that
 * waited for a busy event loop shortened every window by the wait).
 */
describe("C4: Redis' clock as this host reads it (RedisClock)", () => {
  /** A clock whose host runs `offset` ms behind Redis, read by requests of `rtt` ms sent at `at`. */
  const reading = (clock: RedisClock, offset: number, at: number, rtt: number, replyWaits = 0) =>
    clock.read(at + offset + rtt / 2, at, at + rtt + replyWaits);

  it('a reading puts the offset in the middle of its bounds', () => {
    const clock = new RedisClock();
    reading(clock, 5000, 1_000_000, 2);
    expect(clock.leadMs).toBe(-5000);
  });

  it('a reply that waited 2 s for a busy event loop leaves the estimate where it was', () => {
    const clock = new RedisClock();
    reading(clock, 5000, 1_000_000, 2);
    reading(clock, 5000, 1_000_100, 2, 2000);
    expect(clock.leadMs).toBe(-5000);
  });

  it('tighter readings narrow it; looser ones that agree do not widen it', () => {
    const clock = new RedisClock();
    // a first reading of 40 ms round trip, its Redis time read 10 ms after sending
    clock.read(1_000_000 + 3000 + 10, 1_000_000, 1_000_040);
    expect(clock.leadMs).toBe(-(3000 + 10 - 20));
    // a 2 ms one, centred on the true offset (3000): the bounds shrink to [2999, 3001] ∩ [2970, 3010]
    reading(clock, 3000, 1_000_100, 2);
    expect(clock.leadMs).toBe(-3000);
    reading(clock, 3000, 1_000_200, 30);
    expect(clock.leadMs).toBe(-3000);
  });

  it("a reading whose bounds exclude the estimate (the host's clock was stepped) starts it afresh", () => {
    const clock = new RedisClock();
    reading(clock, 0, 1_000_000, 2);
    // the host's clock steps back 5 s: Redis is now 5 s ahead of it
    reading(clock, 5000, 1_000_100, 2);
    expect(clock.leadMs).toBe(-5000);
    // and forward 7 s
    reading(clock, -2000, 1_000_200, 2);
    expect(clock.leadMs).toBe(2000);
  });

  it("now() is this host's time plus the estimate, in whole ms", () => {
    const clock = new RedisClock();
    const at = Date.now();
    clock.read(at + 1234 + 1, at, at + 3);
    const before = Date.now();
    const now = clock.now();
    expect(Number.isInteger(now)).toBe(true);
    expect(now - before).toBeGreaterThanOrEqual(1234 - 1);
    expect(now - Date.now()).toBeLessThanOrEqual(1234 + 1);
  });

  it("a reading whose bounds only touch the estimate's (one point in common) narrows it to that point", () => {
    const clock = new RedisClock();
    // bounds [900, 1000]
    clock.read(1000, 0, 100);
    expect(clock.leadMs).toBe(-950);
    // bounds [800, 900]: they agree at 900 only
    clock.read(900, 0, 100);
    expect(clock.leadMs).toBe(-900);
  });
});

describe("C4: this host's lead over Redis' clock is reported (RedisClock.watchLead)", () => {
  it('at once when the last reading is past the limit', () => {
    const clock = new RedisClock();
    // this host runs 5 s ahead of Redis
    clock.read(1_000_000 - 5000 + 1, 1_000_000, 1_000_002);
    const leads: number[] = [];
    clock.watchLead(1000, (lead) => leads.push(lead));
    expect(leads).toEqual([5000]);
  });

  it('not before any reading, even at the limit 0', () => {
    const clock = new RedisClock();
    const leads: number[] = [];
    clock.watchLead(0, (lead) => leads.push(lead));
    expect(leads).toEqual([]);
  });

  it('once: a later call changes neither the limit nor who hears it', () => {
    const clock = new RedisClock();
    const first: number[] = [];
    const second: number[] = [];
    clock.watchLead(10_000, (lead) => first.push(lead));
    clock.watchLead(1000, (lead) => second.push(lead));
    clock.read(1_000_000 - 5000 + 1, 1_000_000, 1_000_002);
    expect({ first, second }).toEqual({ first: [], second: [] });
    clock.read(1_000_100 - 20_000 + 1, 1_000_100, 1_000_102);
    expect({ first, second }).toEqual({ first: [20_000], second: [] });
  });
});
