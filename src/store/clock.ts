/**
 * Redis' clock as this host reads it: its own clock plus an offset measured
 * from the replies that carry Redis' time. Redis read its time after the
 * request was sent and before its reply was read, so each reading bounds the
 * true offset: `Redis' time - receive time <= offset <= Redis' time - send
 * time`. The estimate is the middle of the tightest bounds the readings agree
 * on: a reply that waited long for a busy event loop (wide bounds) leaves it
 * where it is instead of shortening every window by the wait, and
 * a reading whose bounds exclude it (the host's clock was stepped) starts it
 * afresh from that reading.
 */
export class RedisClock {
  private lo = -Infinity;
  private hi = Infinity;
  private offsetMs = 0;
  /** `watchLead`'s limit and report; `leading`: the last reading was past the limit. */
  private limitMs = Infinity;
  private onLead: ((leadMs: number) => void) | undefined;
  private leading = false;

  /** A reading: Redis' time `redisMs` in the reply to a request sent at `sentAt`, read at `receivedAt` (this host's ms). */
  read(redisMs: number, sentAt: number, receivedAt = Date.now()): void {
    // each clock is read in whole ms: Redis' time lies in [redisMs, redisMs + 1), this host's at
    // the moment Redis read it in [sentAt, receivedAt + 1)
    const lo = redisMs - receivedAt - 1;
    const hi = redisMs + 1 - sentAt;
    if (lo > this.hi || hi < this.lo) {
      // the bounds disagree: this host's clock moved (a step, or drift over a long time)
      this.lo = lo;
      this.hi = hi;
    } else {
      this.lo = Math.max(this.lo, lo);
      this.hi = Math.min(this.hi, hi);
    }
    this.offsetMs = (this.lo + this.hi) / 2;
    this.checkLead();
  }

  /**
   * Reports (`onLead`) this host's lead over Redis' clock when it is more than `limitMs`: at once
   * if the last reading says so, then whenever a reading crosses the limit (not at every reading
   * past it). Once: a later call changes nothing. Before any reading nothing is known, nothing reported.
   */
  watchLead(limitMs: number, onLead: (leadMs: number) => void): void {
    if (this.onLead) return;
    this.limitMs = limitMs;
    this.onLead = onLead;
    this.checkLead();
  }

  private checkLead(): void {
    // past the limit only when every offset the readings allow is (the least lead they allow):
    // a host in step with Redis is never reported, even at a limit of 0
    const over = -this.hi > this.limitMs;
    if (over && !this.leading) this.onLead!(Math.round(this.leadMs));
    this.leading = over;
  }

  /** Redis' time now, ms since the epoch, as last measured. */
  now(): number {
    return Math.round(Date.now() + this.offsetMs);
  }

  /** How far this host's clock runs ahead of Redis', ms (negative when behind). */
  get leadMs(): number {
    return -this.offsetMs;
  }
}

/** Redis' `TIME` reply (seconds, microseconds) as ms since the epoch, whole ms. */
export function timeMs([sec, usec]: readonly [string, string]): number {
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}
