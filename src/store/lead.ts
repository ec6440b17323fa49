import type { Client } from './client';
import type { RedisClock } from './clock';
import type { StoreKeys } from './keys';

/**
 * How often a host that runs a Worker measures its clock against Redis' (and records its lead
 * when ahead) while it runs no attempt, ms (the record lives 60 s; its worker promotes wake-ups
 * by that clock all along).
 */
const LEAD_REFRESH_MS = 20_000;

/**
 * The clock lead of a host that runs a Worker, recorded for the fleet (`sd:lead`): once as it
 * starts promoting wake-ups (`promotesWakeUps`, or at its first connect after), then by its
 * batches (see BATCH), and every `LEAD_REFRESH_MS` by a batch of no operation while it is idle.
 */
export class LeadRecorder {
  private running = false;
  private promoting: Promise<void> | undefined;
  private leadTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly keys: StoreKeys,
    /** Redis' clock minus this host's, from the latest batch reply. */
    private readonly clock: RedisClock,
    private readonly client: () => Promise<Client>,
    /** A batch of no operation (`Batcher.tick`). */
    private readonly tick: () => Promise<void>,
  ) {}

  /**
   * This host runs a Worker (`createWorker`, `attachWorker`, or `processor` read for one of the
   * host's own): it promotes wake-ups by its clock, so from now on its clock's lead over Redis'
   * is recorded for the fleet (`sd:lead`), before the Worker fetches when awaited, and kept
   * alive while it is idle. A host that runs no Worker (a producer, the ops CLI, a laptop whose
   * clock runs ahead) records nothing: it promotes nothing.
   */
  promotesWakeUps(): Promise<void> {
    if (this.promoting) return this.promoting;
    this.running = true;
    // (not once closed: the timer would outlive the engine)
    if (!this.closed) {
      // every 20 s whatever the last reading said: an idle host measures its clock only so, and
      // a clock in step may step ahead (NTP, a VM resumed) while idle
      this.leadTimer = setInterval(() => void this.tick(), LEAD_REFRESH_MS);
      this.leadTimer.unref();
    }
    // once (every Worker of the host awaits the same record); a first connect that fails records
    // it when it succeeds (client() does, once `promotes` is set)
    this.promoting = this.client().then((c) => this.recordLead(c));
    return this.promoting;
  }

  /** This host runs a Worker: its clock lead is recorded (`promotesWakeUps`). */
  get promotes(): boolean {
    return this.running;
  }

  /** Records this host's clock lead when it runs ahead and leads the fleet's record (the batch script keeps it up to date; see BATCH). */
  async recordLead(c: Client): Promise<void> {
    const lead = this.clock.leadMs;
    if (lead > 50 && lead > Number((await c.get!(this.keys.lead)) ?? 0))
      await c.set!(this.keys.lead, lead, 'PX', 60_000);
  }

  /** The store closes: the refresh stops, and none starts after. */
  close(): void {
    this.closed = true;
    clearInterval(this.leadTimer);
  }
}
