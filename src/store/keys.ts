/**
 * The engine's Redis key names for one queue. Every key lives under
 * `<prefix>:<queueName>:`, like BullMQ's own, so a hash-tagged prefix keeps
 * them all in the queue's cluster slot:
 *
 *   sd:deferred:<stageId>  marker: value = wake-up job id, PX = the window
 *   sd:inflight:<stageId>  in-flight dispatch lock, live while it exists (PX lockMs): value =
 *                          `<job id>\n<fencing token>`, a job's `<job id>\n<fencing token>\n<BullMQ lock token>`
 *   sd:licences            sorted set of licence members, one per stage at most
 *   sd:fence               the queue's fencing counter (max(last + 1, Redis µs); a batch reserves one per begin, in one write)
 *   sd:wq:<kind>           the kind's capacity chains by start time (wakeDeferred)
 *   sd:wqk                 the stage kinds with a wait index
 *   sd:wseq, sd:wseq:<kind>  wakeDeferred calls (a dispatch in flight watches them)
 *   de:<stageId>           BullMQ deduplication key of the stage's enqueued job
 *   <job id>               BullMQ's job hash (the engine adds fields `sd*`)
 */
export class StoreKeys {
  /** `<prefix>:<queueName>:` */
  readonly base: string;

  constructor(prefix: string, queueName: string) {
    this.base = `${prefix}:${queueName}:`;
  }

  marker(sid: string): string {
    return `${this.base}sd:deferred:${sid}`;
  }
  lock(sid: string): string {
    return `${this.base}sd:inflight:${sid}`;
  }
  get index(): string {
    return `${this.base}sd:licences`;
  }
  get fence(): string {
    return `${this.base}sd:fence`;
  }
  /** Never written: `PERSIST` on it routes a pipeline to the queue's master and changes nothing. */
  get route(): string {
    return `${this.base}sd:route`;
  }
  dedup(sid: string): string {
    return `${this.base}de:${sid}`;
  }
  job(jobId: string): string {
    return `${this.base}${jobId}`;
  }
  /** BullMQ's `meta` hash of the queue. */
  get meta(): string {
    return `${this.base}meta`;
  }
  /** A BullMQ state set or list: `wait`, `active`, `delayed`, `failed`, ... */
  set(name: string): string {
    return `${this.base}${name}`;
  }
}
