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
});
