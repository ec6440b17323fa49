/**
 * Redis' clock as this host reads it: its own clock plus an offset taken from
 * the last reply that carried Redis' time. Redis read its time after the
 * request was sent, so `Redis' time - this host's time at sending` is never
 * less than the true offset: the estimate errs late, never early, and a window
 * measured from it ends no earlier than asked (later by the request's way
 * there and its wait in Redis, well under a millisecond on a LAN), however
 * long the reply then waits for a busy event loop. Each reply replaces it: a
 * host clock that NTP steps is followed at the next one.
 */
export class RedisClock {
  private offsetMs = 0;

  /** A reading: Redis' time `redisMs` in the reply to a request sent at `sentAt` (this host's ms). */
  read(redisMs: number, sentAt: number): void {
    this.offsetMs = redisMs - sentAt;
  }

  /** Redis' time now, ms since the epoch, as last measured. */
  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** How far this host's clock runs ahead of Redis', ms (at least; negative when behind). */
  get leadMs(): number {
    return -this.offsetMs;
  }
}
