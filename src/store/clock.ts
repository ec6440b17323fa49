/** How long the tightest reading of Redis' clock stands before a looser one may replace it, ms. */
const HOLD_MS = 5000;

/**
 * Redis' clock as this host reads it: its own clock plus an offset measured
 * from Redis' replies. Redis read its time after the request was sent, so
 * `Redis' time - the host's time at sending` is never less than the true
 * offset: the estimate errs late, never early, and a window measured from it
 * ends no earlier than asked (later by a request's way there, well under a
 * millisecond on a LAN), however long the reply then waited for a busy event
 * loop. The tightest reading of the last few seconds is kept; a looser one (a
 * request that queued) replaces it only once it is older than `HOLD_MS`, so a
 * clock the host's NTP steps is followed within seconds.
 */
export class RedisClock {
  private offsetMs = 0;
  private readAt = -Infinity;

  /** A reading: Redis' time `redisMs` in the reply to a request sent at `sentAt` (this host's ms). */
  read(redisMs: number, sentAt: number): void {
    const offset = redisMs - sentAt;
    const now = Date.now();
    if (offset <= this.offsetMs || now - this.readAt > HOLD_MS) {
      this.offsetMs = offset;
      this.readAt = now;
    }
  }

  /** Redis' time now, ms since the epoch, as last measured. */
  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** How far this host's clock runs ahead of Redis', ms (at least: negative when behind). */
  get leadMs(): number {
    return -this.offsetMs;
  }
}
