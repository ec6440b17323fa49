import type { Job } from 'bullmq';
import fc from 'fast-check';
import type IORedis from 'ioredis';
import { DeferralStore } from '../../src/deferral-store';
import type { DispatchEngine } from '../../src/engine';
import { isWakeUpId, jobIdOfLicence } from '../../src/job-data';
import { stageIdOfJobId } from '../../src/stage-ref';
import type { ExecutorResult, StageRef } from '../../src/types';
import { client, closeClients, dropPrefix, isolated, waitFor } from '../helpers/redis';
import { redisNow } from '../helpers/observe';
import { readStageModel } from '../helpers/transitions';
import { ManualWorker, answer, engineFor, envInt, seedFor, sidOf, type Outcome, LONG_MS } from './harness';

/**
 * Model-based test of the contract: random sequences of user and worker
 * actions run against the real engine (real Redis, real BullMQ, the real
 * processor) and a small in-memory model; after every step the Redis state
 * must match the model, and each stage's state, read from Redis in the words
 * of docs/design.md, may have moved only along that page's transition rows.
 */

const ATTEMPTS = 2;
const CAP_LIMIT = 3;
const IDEM_LIMIT = 2;
/** Both windows: no window ends by itself during a run (Expire promotes a wake-up instead). */
const WINDOW_MS = 600_000;
/** How long a job that found its stage in flight waits before it tries again. */
const IN_FLIGHT_RETRY_MS = 100;
/** Job states in which a job still holds its stage (a `?` licence member counts only then). */
const QUEUED = new Set(['waiting', 'delayed', 'active', 'prioritized']);

const REFS: StageRef[] = [
  { scope: ['b1', 'c1'], stage: 'image' },
  { scope: ['b1', 'c1'], stage: 'video' },
  { scope: ['b1', 'c2'], stage: 'image' },
  { scope: ['b2', 'c1'], stage: 'image' },
];
const SCOPES: string[][] = [['b1'], ['b1', 'c1'], ['b1', 'c2'], ['b2']];
/** The resource video stages, and every stage of book b2, need (`resourceOf`). */
const GPU = 'gpu';
const needsGpu = (ref: StageRef) => ref.stage === 'video' || ref.scope[0] === 'b2';
/** The gpu gate: no key; closed for a window; one probe in flight; its window (or the probe's lease) ended. */
type Gate = 'open' | 'closed' | 'probing' | 'ended';

type State = 'idle' | 'pending' | 'deferred' | 'wakeable' | 'ended';
interface MStage {
  ref: StageRef;
  sid: string;
  state: State;
  end?: 'dispatched' | 'cancelled' | 'done' | 'failed' | 'limit';
  /** The deferral marker exists. */
  marker: boolean;
  cap: number;
  idem: number;
  /** Real failures spent by earlier jobs of the chain. */
  failures: number;
  /** BullMQ's attemptsMade of the stage's current job: its own failures (a retry by hand may keep them). */
  bull: number;
  /** Where the job of a pending or woken stage is: waiting, or delayed and due now (sent back by close()). */
  queued: 'waiting' | 'delayed';
  /** The pending job failed for good and was retried by hand: it holds the stage by its own licence member, marked `?` until it begins, `!` after. */
  retried?: { id: string; mark: '?' | '!' };
  /** The job that failed for good (end `failed` or `limit`), and whether a cancel reached it after it failed. */
  failedJob?: string;
  failedCancelled?: boolean;
  /** The members `<m>?` the jobs failed for good leave in the licence index (one per job, until a cancel or a retry by hand): they hold nothing while their jobs are failed. */
  marks: string[];
  /** The pending job failed (not for good) and holds the stage by its own member while it waits out its backoff. */
  held?: string;
  /** The class of the stage's current deferral. */
  cls?: 'capacity' | 'idempotent';
  /** When (model time) the stage's chain of capacity deferrals began: wakeDeferred wakes the oldest first. */
  chainStart?: number;
  /** A job that close() sent back; counted when it runs again. */
  interrupted?: string;
  /** What the executor answers next; with it, a success's `capacityLeft`, a capacity answer's resource (gpu). */
  next: Outcome;
  left?: number;
  named?: boolean;
  /** The stage's next attempt needs the gpu: its kind's `resourceOf`, or its wake-up's data names it. */
  gpu: boolean;
  /** Its chain's entry in its kind's wait index (a capacity deferral with no resource): model time of its score. */
  wq?: number;
  /** Its entry in the gpu line (model time of its score), also one its next line wake will drop. */
  line?: number;
}
interface Model {
  stages: MStage[];
  /** Jobs still queued although cancelled: each completes as cancelled (or suppressed) without an executor call. */
  strays: Set<string>;
  gate: Gate;
}
interface Real {
  engine: DispatchEngine;
  worker: ManualWorker;
  redis: IORedis;
  prefix: string;
  queueName: string;
  model: Model;
  calls: { sid: string; state: State }[];
  violations: string[];
  /** Stages whose executor is running now, and the last fencing token each stage's executor saw. */
  running: Set<string>;
  fences: Map<string, number>;
  /** While set, the executor blocks until its signal aborts (after calling `started`), then throws the abort reason. */
  hold?: { started: () => void };
  /** A one-off answer for one stage (a direct dispatch). */
  answerOnce?: { sid: string; outcome: Outcome };
  /** The command running (for messages); each stage's real state last seen; the events the step involved per stage. */
  action: string;
  seen: Map<string, { state: string; liveAt: number }>;
  involved: Map<string, Set<Event>>;
}
type Processed = { job: Job; result?: unknown; error?: Error };

/** Model time: increases with every chain start. */
let modelClock = 0;

function fresh(s: MStage) {
  delete s.held;
  delete s.chainStart;
  delete s.wq;
  s.cap = 0;
  s.idem = 0;
  s.failures = 0;
}

function makeEngine(real: Real) {
  return engineFor(real.prefix, real.queueName, {
    executor: async (ref, _payload, ctx) => {
      const s = real.model.stages.find((x) => x.sid === sidOf(ref))!;
      real.calls.push({ sid: s.sid, state: s.state });
      if (s.state === 'deferred') real.violations.push(`executor called for ${s.sid} inside its window`);
      if (s.state !== 'pending' && s.state !== 'wakeable')
        real.violations.push(`executor called for ${s.sid} in state ${s.state}`);
      if (real.running.has(s.sid)) real.violations.push(`two executors of ${s.sid} at once`);
      if (gated(real.model, s)) real.violations.push(`executor called for ${s.sid} behind a ${real.model.gate} gate`);
      const last = real.fences.get(s.sid) ?? 0;
      if (!(ctx.fencingToken > last))
        real.violations.push(`fencing token ${ctx.fencingToken} of ${s.sid} not above ${last}`);
      real.fences.set(s.sid, ctx.fencingToken);
      real.running.add(s.sid);
      try {
        if (real.hold) {
          real.hold.started();
          await new Promise((resolve) =>
            ctx.signal.aborted ? resolve(undefined) : ctx.signal.addEventListener('abort', resolve, { once: true }),
          );
          throw ctx.signal.reason;
        }
        const once = real.answerOnce;
        if (once?.sid === s.sid) {
          real.answerOnce = undefined;
          return answer(once.outcome);
        }
        const extra: Partial<ExecutorResult<string>> =
          s.next === 'dispatched' && s.left !== undefined
            ? { capacityLeft: s.left }
            : s.next === 'capacity' && s.named
              ? { resource: GPU }
              : {};
        return { ...answer(s.next), ...extra };
      } finally {
        real.running.delete(s.sid);
      }
    },
    windows: { capacitySeconds: WINDOW_MS / 1000, idempotentSeconds: WINDOW_MS / 1000, jitter: 0 },
    retry: { attempts: ATTEMPTS, backoff: { type: 'fixed', delay: 0 } },
    limits: { maxCapacityDeferrals: CAP_LIMIT, maxIdempotentDeferrals: IDEM_LIMIT },
    inFlightRetryMs: IN_FLIGHT_RETRY_MS,
    resourceOf: (ref) => (needsGpu(ref) ? GPU : undefined),
    // a probe's lease outlives every run (GateWindowEnds ends it), as the windows do
    lockMs: WINDOW_MS,
  });
}

/** The worker: BullMQ's stalled check may redeliver a job many times (the Stall command). */
const newWorker = (r: Pick<Real, 'queueName' | 'prefix'>) =>
  new ManualWorker(r.queueName, r.prefix, { maxStalledCount: 1_000_000 });

const base = (r: Real) => `${r.prefix}:${r.queueName}:`;
const lockKey = (r: Real, sid: string) => `${base(r)}sd:inflight:${sid}`;

/**
 * 1 while the stage's lock is live (the stage is in flight), as the scripts
 * judge it (`liveLock`): a plain lock while its key exists; a lock tied to a
 * job (`<job id>\n<fence>\n<BullMQ token>`, a leading newline + that once
 * cancelled) while BullMQ's lock of that job holds the token or the job has
 * not finished (BullMQ finishing it ends the attempt at once). A success
 * of a stage with no licence releases its tied lock lazily (in a later batch):
 * the key may outlive the job's completion for a moment, dead.
 */
async function liveLock(r: Real, sid: string): Promise<number> {
  const value = await r.redis.get(lockKey(r, sid));
  if (value === null) return 0;
  // a cancel marks the token with a leading newline (a direct call's token '\n<fence>' has no second one)
  const l = value.startsWith('\n') && value.indexOf('\n', 1) > 0 ? value.slice(1) : value;
  const parts = l.split('\n');
  if (parts.length < 3) return 1;
  if ((await r.redis.get(`${base(r)}${parts[0]!}:lock`)) === parts[2]) return 1;
  // BullMQ's lock is gone: live while the job has not finished (a stalled worker's attempt)
  const job = `${base(r)}${parts[0]!}`;
  return (await r.redis.exists(job)) === 1 && (await r.redis.hget(job, 'finishedOn')) === null ? 1 : 0;
}
const stageOf = (m: Model, jobId: string) => m.stages.find((x) => x.sid === stageIdOfJobId(jobId))!;
const live = (s: MStage) => s.state === 'pending' || s.state === 'deferred' || s.state === 'wakeable';
/** A stage's attempt that defers at once, calling nothing: it needs the gpu, whose gate is closed or probed by another. */
const gated = (m: Model, s: MStage) => s.gpu && (m.gate === 'closed' || m.gate === 'probing');
/** The stage holds a licence: its deferral's, a job retried by hand's, a job's waiting out its backoff. */
const holds = (s: MStage) =>
  s.state === 'deferred' || s.state === 'wakeable' || (s.state === 'pending' && (!!s.retried || !!s.held));
/** It holds a licence proper: what `holds` says, but a job retried by hand whose `?` record holds it (a record is no licence). */
const holdsLicence = (s: MStage) => holds(s) && !(s.state === 'pending' && !s.held && s.retried?.mark === '?');
/** Its capacity deferral is open (a wake may end it): also once its wake-up was promoted, not begun yet. */
const wakeable = (s: MStage) => (s.state === 'deferred' || s.state === 'wakeable') && s.marker && s.cls === 'capacity';
const gateKey = (r: Real) => `${base(r)}sd:gate:${GPU}`;
const lineKey = (r: Real) => `${base(r)}sd:wq:@${GPU}`;

/**
 * A wake of the gpu line (`n` stages, oldest entry first): each open capacity deferral it meets
 * wakes (and keeps its place: its chain goes on); an entry whose stage holds no licence (a failed
 * job's record is none) leaves the line; it stops at the `n`th woken. Returns the woken.
 */
function wakeLine(m: Model, n: number): MStage[] {
  const woken: MStage[] = [];
  const line = m.stages.filter((s) => s.line !== undefined).sort((a, b) => a.line! - b.line!);
  for (const s of line) {
    if (woken.length === n) break;
    if (wakeable(s)) {
      woken.push(s);
      s.marker = false;
      if (s.state === 'deferred') s.queued = 'waiting';
      s.state = 'wakeable';
    } else if (!holdsLicence(s)) delete s.line;
  }
  return woken;
}

/**
 * A capacity deferral of the chain's `count`th: in the gpu line when it has the resource, else in
 * its kind's wait index. A chain waits in one: one in its kind's index moves to the line, its start kept.
 */
function capacityDeferred(s: MStage, count: number, gpu: boolean) {
  if (count === 1) s.chainStart = ++modelClock;
  s.gpu = gpu;
  if (!gpu) s.wq = count === 1 ? s.chainStart : (s.wq ?? ++modelClock);
  else {
    if (count === 1) s.line = s.chainStart;
    else s.line ??= s.wq ?? ++modelClock;
    delete s.wq;
  }
}

async function licencesOf(r: Real, sid: string): Promise<string[]> {
  return r.redis.zrangebylex(`${base(r)}sd:licences`, `[${sid}@`, `[${sid}@\xff`);
}

/**
 * The model of docs/design.md (its transition tables): every stage's real state, read from Redis
 * after every step, may change only along the table's rows of the events the step may involve.
 * Each row's event, by its leading words; a row that names none, or two, fails the test.
 */
const EVENTS = {
  enqueue: /^`enqueue`/,
  begin: /^begin of its job/,
  'begin-deferred': /^begin of anything but its own wake-up/,
  'begin-in-flight': /^begin of another/,
  success: /^success, or the idempotent bound/,
  defer: /^capacity or idempotent answer/,
  retry: /^real failure, retries left/,
  fail: /^last failure/,
  close: /^`engine\.close\(\)` interrupts/,
  'lock-expiry': /^lock's TTL ran out/,
  window: /^the window ends/,
  wake: /^`wakeDeferred`/,
  clear: /^a clear/,
  cancel: /^`cancelStage`/,
  'retry-by-hand': /^retry by hand/,
  removed: /^a removed job/,
  'begin-gated': /^begin, the gate closed/,
  gated: /^the `gated` answer/,
  'begin-probe': /^begin, the gate's window ended/,
  'capacity-resource': /^capacity answer with a resource/,
  'success-resource': /^success with a resource/,
  'line-wake': /^woken by a success with its resource/,
  'wake-resource': /^`wakeDeferred\(\{ resource \}\)`/,
} as const;
type Event = keyof typeof EVENTS;
/** Rows no step of this model takes, and why. */
const UNREACHED: Partial<Record<Event, string>> = {
  removed:
    'the model removes no job by hand (its licence would outlive it until met: the invariants would need to know)',
};
const TABLE = readStageModel().moves.map((mv) => {
  const events = (Object.keys(EVENTS) as Event[]).filter((e) => EVENTS[e].test(mv.event));
  if (events.length !== 1)
    throw new Error(`docs/design.md: a transition row of ${events.length} known events: ${mv.row}`);
  return { ...mv, key: events[0]! };
});
// every event has its row: a row lost (a table the parser skipped, a row deleted) fails here, not
// only where a step needs it (a row whose stage stays put, "writes nothing", no step would miss)
for (const e of Object.keys(EVENTS) as Event[])
  if (!TABLE.some((mv) => mv.key === e)) throw new Error(`docs/design.md: no transition row for the event ${e}`);
/** How often each row (by index in TABLE) was taken. */
const taken = TABLE.map(() => 0);

/** A path from `a` to `b` (a != b) along rows of `events`, shortest first; the rows' indexes, or undefined. */
function pathOf(a: string, b: string, events: Set<Event>): number[] | undefined {
  const via = new Map<string, number[]>([[a, []]]);
  for (const queue = [a]; queue.length > 0;) {
    const at = queue.shift()!;
    for (const [k, mv] of TABLE.entries()) {
      if (!events.has(mv.key) || !mv.from.includes(at)) continue;
      for (const to of mv.to)
        if (!via.has(to)) {
          via.set(to, [...via.get(at)!, k]);
          if (to === b) return via.get(to);
          queue.push(to);
        }
    }
  }
  return undefined;
}

/** The events a step may involve for a stage (its real state checked at the next observation). */
function involve(r: Real, sid: string, ...events: Event[]) {
  const set = r.involved.get(sid) ?? new Set<Event>();
  for (const e of events) set.add(e);
  r.involved.set(sid, set);
}
/** A begin of a stage's attempt: behind a closed gate, the probe of one whose window ended, or plain. */
const beginOf = (m: Model, s: MStage): Event =>
  gated(m, s) ? 'begin-gated' : s.gpu && m.gate === 'ended' ? 'begin-probe' : 'begin';

/**
 * A stage's state in the table's words, read from Redis: the lock, the marker and the wake-up it
 * names, the licence's job (its `failedReason`: it waits out a backoff), a job retried by hand
 * (its `?` record, its job queued), an enqueued job (`de:`), a record of a job that failed since
 * the stage was last seen live (`liveAt`: one failed before its last chain leaves the stage idle).
 */
async function realState(r: Real, sid: string, liveAt: number): Promise<string> {
  if ((await liveLock(r, sid)) === 1) return 'in flight';
  const stateOf = (id: string) => r.engine.queue.getJobState(id);
  const marker = await r.redis.get(`${base(r)}sd:deferred:${sid}`);
  if (marker !== null) {
    const st = await stateOf(marker);
    if (st === 'delayed') return 'deferred';
    if (QUEUED.has(st)) return 'due';
  }
  const members = await licencesOf(r, sid);
  for (const l of members.filter((x) => !x.endsWith('?'))) {
    const id = jobIdOfLicence(l);
    if (!QUEUED.has(await stateOf(id))) continue;
    if ((await r.redis.hget(`${base(r)}${id}`, 'failedReason')) !== null) return 'retrying';
    return isWakeUpId(sid, id) ? 'due' : 'pending';
  }
  const records = members.filter((x) => x.endsWith('?')).map(jobIdOfLicence);
  for (const id of records) if (QUEUED.has(await stateOf(id))) return 'pending';
  const enqueued = await r.redis.get(`${base(r)}de:${sid}`);
  if (enqueued !== null && QUEUED.has(await stateOf(enqueued))) return 'pending';
  for (const id of records)
    if ((await stateOf(id)) === 'failed' && Number(await r.redis.hget(`${base(r)}${id}`, 'finishedOn')) >= liveAt)
      return 'failed';
  return 'idle';
}

/**
 * Reads every stage's real state and checks its change since the last observation against the
 * table, along the rows of the events the step involved for it (none: it may not change); counts
 * the rows taken (a stage that stayed put takes the rows from its state to itself, if any).
 */
async function observe(m: Model, r: Real) {
  const now = Date.now();
  for (const s of m.stages) {
    const before = r.seen.get(s.sid) ?? { state: 'idle', liveAt: 0 };
    const state = await realState(r, s.sid, before.liveAt);
    const events = r.involved.get(s.sid) ?? new Set<Event>();
    let rows: number[] | undefined = [];
    if (state !== before.state) rows = pathOf(before.state, state, events);
    else
      for (const [k, mv] of TABLE.entries())
        if (events.has(mv.key) && mv.from.includes(state) && mv.to.includes(state)) rows.push(k);
    const step = { step: r.action, stage: s.sid, from: before.state, to: state, events: [...events].sort() };
    expect({ ...step, inTable: rows !== undefined }).toEqual({ ...step, inTable: true });
    for (const k of rows ?? []) taken[k]! += 1;
    r.seen.set(s.sid, { state, liveAt: state === 'idle' || state === 'failed' ? before.liveAt : now });
  }
  r.involved.clear();
}

/** The invariants, checked after every command. */
async function checkInvariants(m: Model, r: Real) {
  executed.checked += 1;
  expect(r.violations).toEqual([]);
  const [[, time], [, g], [, line]] = (await r.redis
    .multi()
    .time()
    .get(gateKey(r))
    .zrange(lineKey(r), '0', '-1')
    .exec()) as [unknown, unknown][] as [[null, [string, string]], [null, string | null], [null, string[]]];
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const gate: Gate =
    g === null ? 'open' : Number(g.replace(/^p/, '')) <= now ? 'ended' : g.startsWith('p') ? 'probing' : 'closed';
  // the gate, and the line: its chains and the entries its next wake drops, oldest first
  expect({ gate, line }).toEqual({
    gate: m.gate,
    line: m.stages
      .filter((s) => s.line !== undefined)
      .sort((a, b) => a.line! - b.line!)
      .map((s) => s.sid),
  });
  const jobs = await r.engine.queue.getJobs(['wait', 'delayed', 'active', 'prioritized']);
  // a cancelled job still queued (retried by hand after the cancel) is known to the model, and nothing else is
  expect({ strays: jobs.filter((j) => m.strays.has(j.id as string)).map((j) => j.id) }).toEqual({
    strays: [...m.strays],
  });
  for (const s of m.stages) {
    const ctx = `stage ${s.sid} (model: ${s.state}${s.end ? `/${s.end}` : ''}${s.retried ? `, retried${s.retried.mark}` : ''})`;
    expect({ ctx, marker: (await r.redis.exists(r.engine.deferredStageKey(s.ref))) === 1 }).toEqual({
      ctx,
      marker: s.marker,
    });
    // no stage is in flight once its command is over (its job completed, failed, or was delayed)
    expect({ ctx, lock: await liveLock(r, s.sid) }).toEqual({ ctx, lock: 0 });
    // a member marked `?` is a job failed for good: it holds the stage only while its job is queued again (retried by hand)
    const held: string[] = [];
    const failedMarks: string[] = [];
    for (const l of await licencesOf(r, s.sid)) {
      if (l.endsWith('?') && !QUEUED.has(await r.engine.queue.getJobState(jobIdOfLicence(l)))) failedMarks.push(l);
      else held.push(l);
    }
    const mine = jobs.filter((j) => stageIdOfJobId(j.id as string) === s.sid && !m.strays.has(j.id as string));
    const liveJobs = mine.filter(
      (j) => (j.id as string).includes('@r.') || held.some((l) => jobIdOfLicence(l) === j.id),
    );
    const waysBack = live(s) ? 1 : 0;
    // exactly one way back for a stage that is neither ended nor idle; none otherwise
    expect({ ctx, waysBack: liveJobs.length, jobs: mine.length }).toEqual({ ctx, waysBack, jobs: waysBack });
    // a deferred or woken stage is held by one licence, a job retried by hand by its own; an ended one by none
    expect({ ctx, licences: held.length }).toEqual({ ctx, licences: holds(s) ? 1 : 0 });
    if (s.state === 'pending' && s.retried)
      expect({ ctx, held }).toEqual({ ctx, held: [`${s.retried.id}${s.retried.mark}`] });
    else if (s.state === 'pending' && s.held) expect({ ctx, held }).toEqual({ ctx, held: [s.held] });
    // a job failed for good leaves its `?` member (until a cancel, a newer failure or the stage's next chain ends)
    expect({ ctx, failedMarks: failedMarks.sort() }).toEqual({
      ctx,
      failedMarks: s.marks.map((mk) => `${mk}?`).sort(),
    });
    if (s.state === 'deferred') expect({ ctx, st: await liveJobs[0]!.getState() }).toEqual({ ctx, st: 'delayed' });
    // a job delayed due now is promoted to waiting by the next fetch
    if (s.state === 'pending' || s.state === 'wakeable')
      expect({ ctx, st: await liveJobs[0]!.getState() }).toEqual({
        ctx,
        st: s.queued === 'waiting' ? 'waiting' : expect.stringMatching(/^(delayed|waiting)$/),
      });
  }
  await observe(m, r);
}

/** What the runs covered, printed at the end (and quoted in docs/reliability.md). */
const stats: Record<string, number> = {};
/** Commands run: those followed by an invariant check, and executor scripts; cases run. */
const executed = { checked: 0, scripts: 0, cases: 0 };
const tally = (what: string) => (stats[what] = (stats[what] ?? 0) + 1);
/** The tallies whose key starts with `prefix`, summed. */
const tallied = (prefix: string) =>
  Object.entries(stats)
    .filter(([k]) => k.startsWith(prefix))
    .reduce((n, [, v]) => n + v, 0);

type Cmd = fc.AsyncCommand<Model, Real, false>;

/** No job can be fetched: then no stage may be waiting for one. */
function expectNothingPending(m: Model) {
  expect({
    pending: m.stages.filter((s) => s.state === 'pending' || s.state === 'wakeable').map((s) => s.sid),
    strays: [...m.strays],
  }).toEqual({ pending: [], strays: [] });
}

/**
 * The model's update for one job the worker processed (the processor ran
 * to its end), with the checks of its result. `callsBefore`: executor calls
 * before it was processed.
 */
async function applyProcessed(m: Model, r: Real, out: Processed, callsBefore: number): Promise<void> {
  const id = out.job.id as string;
  if (m.strays.has(id)) {
    m.strays.delete(id);
    involve(r, stageIdOfJobId(id), 'begin-deferred');
    const res = (out.result ?? {}) as { cancelled?: boolean; deferred?: boolean };
    // cancelled; or suppressed when its stage is deferred again by now (the marker is read first)
    const outcome = res.cancelled === true ? 'cancelled' : res.deferred === true ? 'suppressed' : JSON.stringify(res);
    expect({ stray: id, calls: r.calls.length - callsBefore, error: out.error?.message, outcome }).toEqual({
      stray: id,
      calls: 0,
      error: undefined,
      outcome: expect.stringMatching(/^(cancelled|suppressed)$/),
    });
    tally(`process:stray:${outcome}`);
    return;
  }
  const s = stageOf(m, id);
  expect({ job: id, state: s.state }).toEqual({
    job: id,
    state: expect.stringMatching(/^(pending|wakeable)$/),
  });
  // behind a closed gate the attempt defers at once; once its window ended, the first attempt probes
  const parked = gated(m, s);
  involve(r, s.sid, beginOf(m, s));
  if (s.gpu && m.gate === 'ended') m.gate = 'probing';
  const next = parked ? 'gated' : s.next;
  // a success of a stage that held anything ends its chain (and its line entry)
  const heldBefore = holds(s) || s.marks.length > 0;
  expect({ job: id, out: out.result ?? out.error?.message, calls: r.calls.length - callsBefore }).toEqual({
    job: id,
    out: out.result ?? out.error?.message,
    calls: parked ? 0 : 1,
  });
  if (s.interrupted === id) tally('close:ran-again');
  delete s.interrupted;
  const retried = s.retried !== undefined;
  s.marker = false;
  const st = await r.engine.queue.getJobState(id);
  // failed for good: the job keeps the member `<job>?` (a retry by hand or a cancel can still reach it)
  const failedForGood = () => {
    expect({ job: id, st }).toEqual({ job: id, st: 'failed' });
    s.state = 'ended';
    s.failedJob = id;
    s.failedCancelled = false;
    if (!s.marks.includes(id)) s.marks.push(id);
    s.bull += 1;
  };
  switch (next) {
    case 'dispatched': {
      expect(out.result).toMatchObject({ dispatched: true });
      // a success with the gpu opens its gate and wakes capacityLeft (else 2) of its line; 0 closes the gate
      const woken = !s.gpu ? [] : s.left === 0 ? [] : wakeLine(m, s.left ?? 2);
      if (s.gpu) m.gate = s.left === 0 ? 'closed' : 'open';
      if (s.gpu && heldBefore) delete s.line;
      if (s.gpu) tally(`line:woke:${woken.length}${s.left === undefined ? '' : `:left${s.left}`}`);
      involve(r, s.sid, s.gpu ? 'success-resource' : 'success');
      for (const w of woken) involve(r, w.sid, 'line-wake');
      s.state = 'ended';
      s.end = 'dispatched';
      // the release revokes the stage's licence; failed jobs' `?` records stay
      await promoted(r, woken);
      break;
    }
    case 'gated':
    case 'capacity':
    case 'idempotent': {
      const cap = next !== 'idempotent';
      const count = (cap ? s.cap : s.idem) + 1;
      if (count > (cap ? CAP_LIMIT : IDEM_LIMIT)) {
        involve(r, s.sid, cap ? 'fail' : 'success');
        s.state = 'ended';
        // past the bound, a capacity answer for the gpu still closes its gate (a gated attempt leaves it)
        if (next === 'capacity' && (s.gpu || !!s.named)) m.gate = 'closed';
        if (cap) {
          s.end = 'limit';
          expect(out.error?.message).toMatch(/deferred \d+ times in a row/);
          failedForGood();
        } else {
          s.end = 'done';
          expect(out.result).toMatchObject({ completed: true, dispatched: false });
        }
      } else {
        expect(out.result).toMatchObject({ dispatched: false, retryable: true, until: expect.any(Number) });
        if (cap) s.cap = count;
        else s.idem = count;
        const gpu = s.gpu || (next === 'capacity' && !!s.named);
        involve(r, s.sid, next === 'gated' ? 'gated' : cap && gpu ? 'capacity-resource' : 'defer');
        // a capacity answer for the gpu closes its gate; a gated deferral leaves it as it is
        if (next === 'capacity' && gpu) m.gate = 'closed';
        if (cap) capacityDeferred(s, count, gpu);
        else s.gpu = needsGpu(s.ref);
        s.cls = cap ? 'capacity' : 'idempotent';
        s.failures += s.bull;
        s.state = 'deferred';
        s.marker = true;
        s.bull = 0;
        delete s.held;
        // the deferral revokes the stage's licence; failed jobs' `?` records stay
      }
      break;
    }
    case 'failure': {
      // the job's own failures are BullMQ's attemptsMade (a retry by hand keeps them unless reset)
      const spent = s.failures + s.bull + 1;
      expect(out.error).toBeDefined();
      involve(r, s.sid, spent >= ATTEMPTS ? 'fail' : 'retry');
      if (spent >= ATTEMPTS) {
        s.end = 'failed';
        failedForGood();
      } else {
        // BullMQ retries it (backoff 0: waiting)
        s.queued = 'waiting';
        s.bull += 1;
        expect({ job: id, st }).toEqual({ job: id, st: s.queued });
        // it waits out its backoff holding the stage's licence (a retried job keeps its own `!`)
        if (s.retried) s.retried.mark = '!';
        else s.held = id;
      }
      break;
    }
  }
  if (s.state !== 'pending' && s.state !== 'wakeable') delete s.retried;
  tally(`process:${next}:${s.state}${s.end ? `/${s.end}` : ''}${retried ? ':retried' : ''}`);
  if (s.state === 'ended') fresh(s);
}

/** The wake-ups a line wake woke are promoted by the engine after its release: they are waiting once it did. */
async function promoted(r: Real, woken: MStage[]) {
  for (const w of woken) {
    const lic = (await licencesOf(r, w.sid)).find((l) => !l.endsWith('?'));
    const job = await r.engine.queue.getJob(lic!.replace(/!$/, ''));
    await waitFor(async () => (await job!.getState()) !== 'delayed', `${w.sid}'s wake-up to be promoted`);
  }
}

class Enqueue implements Cmd {
  constructor(readonly i: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    involve(r, s.sid, 'enqueue');
    const res = await r.engine.enqueue(s.ref, { i: this.i });
    tally(`enqueue:${s.state}${s.end ? `/${s.end}` : ''}`);
    if (s.marker) expect(res).toMatchObject({ added: false, reason: 'deferred' });
    else if (s.state === 'pending' || s.state === 'wakeable')
      expect(res).toMatchObject({ added: false, reason: 'pending' });
    else {
      expect(res).toMatchObject({ added: true });
      s.state = 'pending';
      delete s.end;
      fresh(s);
      s.bull = 0;
      s.queued = 'waiting';
      s.gpu = needsGpu(s.ref);
      delete s.failedJob;
      delete s.failedCancelled;
    }
    await checkInvariants(m, r);
  }
  toString = () => `enqueue(${this.i})`;
}

class Script implements Cmd {
  constructor(
    readonly i: number,
    readonly outcome: Outcome,
    /** A success's `capacityLeft` (none: the engine's slow start). */
    readonly left?: number,
    /** A capacity answer names the gpu. */
    readonly named = false,
  ) {}
  check = () => true;
  async run(m: Model) {
    const s = m.stages[this.i]!;
    s.next = this.outcome;
    s.left = this.left;
    s.named = this.named;
    executed.scripts += 1;
  }
  toString = () =>
    `script(${this.i}, ${this.outcome}${this.left === undefined ? '' : `, left ${this.left}`}${this.named ? ', gpu' : ''})`;
}

class ProcessNext implements Cmd {
  check = () => true;
  async run(m: Model, r: Real) {
    const before = r.calls.length;
    const out = await r.worker.processNext(r.engine);
    if (!out) expectNothingPending(m);
    else await applyProcessed(m, r, out, before);
    await checkInvariants(m, r);
  }
  toString = () => 'process()';
}

class Expire implements Cmd {
  constructor(
    readonly i: number,
    readonly dropMarker: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.stages[this.i]!.state === 'deferred';
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    // the stage's licence, not a failed job's `?` record beside it
    const lic = (await licencesOf(r, s.sid)).find((l) => !l.endsWith('?'));
    const job = await r.engine.queue.getJob(lic!.replace(/!$/, ''));
    involve(r, s.sid, 'window');
    await job!.promote();
    if (this.dropMarker) {
      await r.redis.del(r.engine.deferredStageKey(s.ref));
      s.marker = false;
    }
    s.state = 'wakeable';
    s.queued = 'waiting';
    await checkInvariants(m, r);
  }
  toString = () => `expire(${this.i}, ${this.dropMarker ? 'marker gone' : 'early'})`;
}

class DirectDispatch implements Cmd {
  constructor(readonly i: number) {}
  check = (m: Readonly<Model>) => m.stages[this.i]!.marker;
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    const events = await r.redis.xlen(`${base(r)}events`);
    const calls = r.calls.length;
    involve(r, s.sid, 'begin-deferred');
    const res = await r.engine.dispatchStage(s.ref, { direct: true });
    expect(res).toMatchObject({ dispatched: false, deferred: true });
    expect(r.calls.length).toBe(calls);
    expect(await r.redis.xlen(`${base(r)}events`)).toBe(events);
    await checkInvariants(m, r);
  }
  toString = () => `dispatchStage(${this.i})`;
}

class Cancel implements Cmd {
  constructor(readonly i: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    involve(r, s.sid, 'cancel');
    const res = await r.engine.cancelActiveDispatch(s.ref, 'user');
    tally(`cancel:${s.state}`);
    const open = live(s);
    if (s.retried?.mark === '?') tally('cancel:retried-before-begin');
    // a job retried by hand that has not begun (held by its `?` member) is removed like any pending job
    expect(res).toMatchObject({ hadDeferral: s.marker, inFlight: false, removedJobs: open ? 1 : 0 });
    if (open) {
      s.state = 'ended';
      s.end = 'cancelled';
      s.marker = false;
      delete s.retried;
      fresh(s);
    } else if (s.failedJob !== undefined && !s.failedCancelled) {
      // a cancel reaches the job that failed for good: a retry by hand of it must not dispatch
      s.failedCancelled = true;
      tally('cancel:after-failure');
    }
    // the cancel revokes every member of the stage, failed jobs' `?` records too
    s.marks = [];
    await checkInvariants(m, r);
  }
  toString = () => `cancel(${this.i})`;
}

class Clear implements Cmd {
  constructor(readonly scope: string[]) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const hit = m.stages.filter((s) => s.marker && this.scope.every((seg, k) => s.ref.scope[k] === seg));
    expect(await r.engine.clearDeferrals(this.scope)).toBe(hit.length);
    tally(`clear:${hit.length}`);
    for (const s of hit) {
      involve(r, s.sid, 'clear');
      s.marker = false;
      s.state = 'wakeable';
      s.queued = 'waiting';
      fresh(s);
    }
    await checkInvariants(m, r);
  }
  toString = () => `clear(${JSON.stringify(this.scope)})`;
}

/**
 * Capacity returned: wakeDeferred wakes the longest-waiting capacity chains
 * (by when their chain began), of one stage kind or any, up to `limit`; their
 * wake-ups run now and their chains go on.
 */
class WakeDeferred implements Cmd {
  constructor(
    readonly limit: number,
    readonly kind: string | undefined,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const expected = m.stages
      // a chain in its kind's wait index (not a resource's line) whose capacity deferral is open
      .filter((s) => wakeable(s) && s.wq !== undefined)
      .filter((s) => this.kind === undefined || s.ref.stage === this.kind)
      .sort((a, b) => a.wq! - b.wq! || (a.sid < b.sid ? -1 : 1))
      .slice(0, this.limit);
    const res = await r.engine.wakeDeferred({ limit: this.limit, ...(this.kind ? { stage: this.kind } : {}) });
    expect({ woken: res.woken }).toEqual({ woken: expected.map((s) => s.ref) });
    tally(`wake:${expected.length}`);
    for (const s of expected) {
      involve(r, s.sid, 'wake');
      s.marker = false;
      if (s.state === 'deferred') s.queued = 'waiting';
      s.state = 'wakeable';
    }
    await checkInvariants(m, r);
  }
  toString = () => `wakeDeferred(${this.limit}${this.kind ? `, ${this.kind}` : ''})`;
}

/** A host that saw a gpu slot free: `wakeDeferred({ resource })` opens the gate and wakes the oldest of its line. */
class WakeGpu implements Cmd {
  constructor(readonly limit: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const expected = wakeLine(m, this.limit);
    m.gate = 'open';
    const res = await r.engine.wakeDeferred({ resource: GPU, limit: this.limit });
    expect({ woken: res.woken }).toEqual({ woken: expected.map((s) => s.ref) });
    tally(`wake-gpu:${expected.length}`);
    for (const s of expected) involve(r, s.sid, 'wake-resource');
    await checkInvariants(m, r);
  }
  toString = () => `wakeDeferred(${this.limit}, resource ${GPU})`;
}

/** Time passes past the gpu gate's window (or its probe's lease), as Expire ends a stage's window: the next attempt probes. */
class GateWindowEnds implements Cmd {
  check = (m: Readonly<Model>) => m.gate === 'closed' || m.gate === 'probing';
  async run(m: Model, r: Real) {
    const past = (await redisNow(r.redis)) - 1;
    await r.redis.set(gateKey(r), `${m.gate === 'probing' ? 'p' : ''}${past}`, 'KEEPTTL');
    tally(`gate-ends:${m.gate}`);
    m.gate = 'ended';
    await checkInvariants(m, r);
  }
  toString = () => 'gateWindowEnds()';
}

class Restart implements Cmd {
  check = () => true;
  async run(m: Model, r: Real) {
    await r.worker.close();
    await r.engine.close();
    r.engine = makeEngine(r);
    r.worker = newWorker(r);
    await checkInvariants(m, r);
  }
  toString = () => 'restart()';
}

/**
 * An operator retries the job that failed for good (Bull Board's Retry):
 * the stage is pending again with a fresh chain, on the budget BullMQ gives
 * the job (reset: a fresh one; else the attempts it has left), held by the
 * job's own `?` member until it begins. A job cancelled after it failed is
 * queued again but completes as cancelled, calling nothing.
 */
class RetryByHand implements Cmd {
  constructor(
    readonly i: number,
    readonly reset: boolean,
  ) {}
  check = (m: Readonly<Model>) => {
    const s = m.stages[this.i]!;
    return s.state === 'ended' && (s.end === 'failed' || s.end === 'limit') && s.failedJob !== undefined;
  };
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    const id = s.failedJob!;
    const job = await r.engine.queue.getJob(id);
    expect({ job: id, state: await job?.getState() }).toEqual({ job: id, state: 'failed' });
    involve(r, s.sid, 'retry-by-hand');
    await job!.retry('failed', { resetAttemptsMade: this.reset });
    delete s.failedJob;
    if (s.failedCancelled) {
      delete s.failedCancelled;
      m.strays.add(id);
      tally(`retry:cancelled:${s.end}`);
    } else {
      tally(`retry:${this.reset ? 'reset' : 'keep'}:${s.end}`);
      s.state = 'pending';
      delete s.end;
      fresh(s);
      if (this.reset) s.bull = 0;
      s.queued = 'waiting';
      s.retried = { id, mark: '?' };
      // its `?` member holds the stage again, now that the job is queued
      s.marks = s.marks.filter((mk) => mk !== id);
    }
    await checkInvariants(m, r);
  }
  toString = () => `retryByHand(${this.i}, ${this.reset ? 'reset' : 'keep attempts'})`;
}

/**
 * The start of a command that gets in the way of the next job's attempt
 * (`what` names it in the tallies): fetches the next job. Resolves
 * `undefined` when there is none (then no stage may be waiting for one) or
 * when it is a stray (a cancelled job retried by hand: processed as any
 * other, tallied `close:stray-first` or `stall:stray-first`), the invariants
 * checked in both cases; else the job fetched, its id and its stage.
 */
async function nextOwnJob(m: Model, r: Real, what: 'close' | 'stall', callsBefore: number) {
  const next = await r.worker.fetch();
  if (!next) {
    expectNothingPending(m);
    await checkInvariants(m, r);
    return undefined;
  }
  const id = next.job.id as string;
  // a gated job calls no executor: nothing to interrupt
  if (m.strays.has(id) || (what === 'close' && gated(m, stageOf(m, id)))) {
    tally(`${what}:${m.strays.has(id) ? 'stray' : 'gated'}-first`);
    await applyProcessed(m, r, await r.worker.run(r.engine, next.job, next.token), callsBefore);
    await checkInvariants(m, r);
    return undefined;
  }
  return { next, id, s: stageOf(m, id) };
}

/**
 * The next job runs with an executor that blocks until its signal aborts,
 * and engine.close() is called meanwhile: the job goes back (delayed, no
 * attempt spent), no lock is left once close() resolved, and the next
 * engine runs it.
 */
class CloseMidFlight implements Cmd {
  check = (m: Readonly<Model>) => m.stages.some((s) => s.state === 'pending' || s.state === 'wakeable');
  async run(m: Model, r: Real) {
    const before = r.calls.length;
    const taken = await nextOwnJob(m, r, 'close', before);
    if (!taken) return;
    const { next, id, s } = taken;
    let started!: () => void;
    const executorStarted = new Promise<'executor'>((resolve) => (started = () => resolve('executor')));
    r.hold = { started };
    let out: Processed;
    try {
      const running = r.worker.run(r.engine, next.job, next.token);
      let timer: NodeJS.Timeout | undefined;
      const first = await Promise.race([
        executorStarted,
        running.then(() => 'ended without an executor call'),
        new Promise((resolve) => (timer = setTimeout(resolve, 10_000, 'timed out'))),
      ]);
      clearTimeout(timer);
      expect({ job: id, first }).toEqual({ job: id, first: 'executor' });
      // in flight now: the begin's row, then the close's
      involve(r, s.sid, beginOf(m, s));
      await observe(m, r);
      involve(r, s.sid, 'close');
      await r.engine.close();
      // close() waited for the interrupted attempt: its lock is released
      expect({ job: id, lock: await r.redis.exists(lockKey(r, s.sid)) }).toEqual({ job: id, lock: 0 });
      out = await running;
    } finally {
      r.hold = undefined;
    }
    expect({ job: id, error: out.error?.name, calls: r.calls.length - before }).toEqual({
      job: id,
      error: 'DelayedError',
      calls: 1,
    });
    r.engine = makeEngine(r);
    const job = await r.engine.queue.getJob(id);
    expect({ job: id, state: await job?.getState(), attemptsMade: job?.attemptsMade }).toEqual({
      job: id,
      state: expect.stringMatching(/^(delayed|waiting)$/),
      attemptsMade: s.bull,
    });
    tally(`close:interrupted:${s.state}${s.retried ? ':retried' : ''}`);
    // its begin ended a woken stage's own marker, and a retried job's `?`; it may have taken the gate's probe
    s.marker = false;
    if (s.gpu && m.gate === 'ended') m.gate = 'probing';
    s.queued = 'delayed';
    s.interrupted = id;
    if (s.retried) s.retried.mark = '!';
    await checkInvariants(m, r);
  }
  toString = () => 'closeMidFlight()';
}

/**
 * A direct dispatchStage on a host whose clock is `skewMs` off answers
 * capacity: the wake-up is due, and the marker expires, at Redis' time +
 * the window, whatever the host's clock says.
 */
class SkewedDeferral implements Cmd {
  constructor(
    readonly i: number,
    readonly skewMs: number,
  ) {}
  check = (m: Readonly<Model>) => m.stages[this.i]!.state === 'idle' || m.stages[this.i]!.state === 'ended';
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
    await r.engine.isStageDeferred(s.ref); // connected, with the true clock
    const trueNow = Date.now.bind(Date);
    r.answerOnce = { sid: s.sid, outcome: 'capacity' };
    s.state = 'pending'; // a direct dispatch is in flight
    // a video stage needs the gpu: behind its closed gate it defers at once (no executor), else it probes
    s.gpu = needsGpu(s.ref);
    const parked = gated(m, s);
    involve(r, s.sid, beginOf(m, s), parked ? 'gated' : s.gpu ? 'capacity-resource' : 'defer');
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => trueNow() + this.skewMs);
    let res;
    try {
      res = await r.engine.dispatchStage(s.ref, { skewed: this.skewMs });
    } finally {
      spy.mockRestore();
      r.answerOnce = undefined;
    }
    expect(res).toMatchObject({
      dispatched: false,
      reason: parked ? 'gate_closed' : 'no_worker_available',
      until: expect.any(Number),
    });
    if (s.gpu && !parked) m.gate = 'closed';
    // the stage's licence (failed jobs' `?` records may stand beside it)
    const lic = (await licencesOf(r, s.sid)).filter((l) => !l.endsWith('?'));
    expect(lic).toHaveLength(1);
    const replies = (await r.redis
      .multi()
      .time()
      .pttl(r.engine.deferredStageKey(s.ref))
      .zscore(`${base(r)}delayed`, lic[0]!)
      .exec())!.map(([, v]) => v);
    const [sec, usec] = replies[0] as [string, string];
    const redisNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const pttl = Number(replies[1]);
    const due = Math.floor(Number(replies[2]) / 0x1000);
    // due at the window's end on Redis' clock (less the ms since the deferral), not the host's: the host's
    // estimate of Redis' time is off by up to a round trip (long on a loaded machine), its clock by 3-9 s
    const early = WINDOW_MS - (due - redisNow);
    expect({ skew: this.skewMs, dueIsUntil: due === res.until, earlyOk: Math.abs(early) < 1000 }).toEqual({
      skew: this.skewMs,
      dueIsUntil: true,
      earlyOk: true,
    });
    // the marker expires at the same instant
    expect({ skew: this.skewMs, pttlOff: Math.abs(pttl - (due - redisNow)) <= 5 }).toEqual({
      skew: this.skewMs,
      pttlOff: true,
    });
    tally(`skew:${this.skewMs < 0 ? 'behind' : 'ahead'}${s.gpu ? `:gpu${parked ? ':gated' : ''}` : ''}`);
    s.state = 'deferred';
    s.marker = true;
    delete s.end;
    fresh(s);
    s.cap = 1;
    s.cls = 'capacity';
    capacityDeferred(s, 1, s.gpu);
    s.bull = 0;
    delete s.failedJob;
    delete s.failedCancelled;
    await checkInvariants(m, r);
  }
  toString = () => `skewedDeferral(${this.i}, ${this.skewMs > 0 ? '+' : ''}${this.skewMs} ms)`;
}

/**
 * A worker takes the next job and begins its attempt (the dispatch lock is
 * taken), then freezes: its BullMQ job lock lapses and the stalled check
 * redelivers the job. The redelivered job finds the stage in flight (delayed,
 * no attempt spent, no executor call) while the frozen lock lives, and runs
 * once it is gone (the frozen worker never returns; its lock expires).
 */
class Stall implements Cmd {
  check = (m: Readonly<Model>) => m.stages.some((s) => s.state === 'pending' || s.state === 'wakeable');
  async run(m: Model, r: Real) {
    const before = r.calls.length;
    const taken = await nextOwnJob(m, r, 'stall', before);
    if (!taken) return;
    const { next, id, s } = taken;
    const frozen = await new DeferralStore(r.engine.queue).begin({
      sid: s.sid,
      ownJobId: id,
      lockMs: 30_000,
      wakeUp: (next.job.data as { wakeUp?: boolean }).wakeUp === true && isWakeUpId(s.sid, id),
      skewToleranceMs: 1000,
    });
    expect({ job: id, begun: frozen.kind }).toEqual({ job: id, begun: 'locked' });
    if (frozen.kind !== 'locked') return;
    involve(r, s.sid, 'begin');
    await observe(m, r);
    const lock = lockKey(r, s.sid);
    s.marker = false;
    if (s.retried) s.retried.mark = '!';
    // the frozen worker renews nothing: its job lock lapses, and the stalled check (mark, then move) redelivers the job
    await r.redis.del(`${base(r)}${id}:lock`);
    await r.worker.stalledCheck(r.redis, r.prefix, r.queueName);
    await r.worker.stalledCheck(r.redis, r.prefix, r.queueName);
    expect({ job: id, state: await r.engine.queue.getJobState(id) }).toEqual({ job: id, state: 'waiting' });
    const again = await r.worker.processNext(r.engine);
    const job = await r.engine.queue.getJob(id);
    expect({
      job: again?.job.id,
      error: again?.error?.name,
      calls: r.calls.length - before,
      state: await job?.getState(),
      attemptsMade: job?.attemptsMade,
      lock: await r.redis.get(lock),
    }).toEqual({
      job: id,
      error: 'DelayedError',
      calls: 0,
      state: 'delayed',
      attemptsMade: s.bull,
      lock: frozen.token,
    });
    tally(`stall:in-flight:${s.state}${s.retried ? ':retried' : ''}`);
    involve(r, s.sid, 'begin-in-flight');
    await observe(m, r);
    // the frozen worker never returns: its lock runs out (as lockMs after its last renewal)
    await r.redis.pexpire(lock, 1);
    await waitFor(async () => (await r.redis.exists(lock)) === 0, 'the frozen lock to expire');
    involve(r, s.sid, 'lock-expiry');
    await observe(m, r);
    s.queued = 'delayed';
    // the job is due inFlightRetryMs after it was delayed; jobs queued before it run first
    const deadline = Date.now() + 10_000;
    for (;;) {
      const callsBefore = r.calls.length;
      const out = await r.worker.processNext(r.engine);
      if (out) {
        await applyProcessed(m, r, out, callsBefore);
        if (out.job.id === id) break;
      } else {
        if (Date.now() > deadline) throw new Error(`the redelivered job ${id} never ran`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    tally('stall:ran-after-lock');
    await checkInvariants(m, r);
  }
  toString = () => 'stall()';
}

const idx = fc.integer({ min: 0, max: REFS.length - 1 });
const outcome = fc.constantFrom<Outcome>('dispatched', 'capacity', 'idempotent', 'failure');
const script = fc
  .tuple(idx, outcome, fc.constantFrom(undefined, 0, 1, 2), fc.boolean())
  .map(([i, o, left, named]) => new Script(i, o, o === 'dispatched' ? left : undefined, o === 'capacity' && named));
const expire = fc.tuple(idx, fc.boolean()).map(([i, d]) => new Expire(i, d));
const enqueue = idx.map((i) => new Enqueue(i));
const processNext = fc.constant(new ProcessNext());
const retryByHand = fc.tuple(idx, fc.boolean()).map(([i, reset]) => new RetryByHand(i, reset));
/** Several seconds off, either way. */
const skew = fc.tuple(fc.integer({ min: 3000, max: 9000 }), fc.boolean()).map(([ms, ahead]) => (ahead ? ms : -ms));
// repeated entries weight the draw towards the commands that move a stage along
const commands = [
  enqueue,
  enqueue,
  script,
  script,
  script,
  processNext,
  processNext,
  processNext,
  processNext,
  expire,
  expire,
  idx.map((i) => new DirectDispatch(i)),
  idx.map((i) => new Cancel(i)),
  fc.constantFrom(...SCOPES).map((s) => new Clear(s)),
  fc.constant(new Restart()),
  // applicable only to a stage that failed for good: weighted up
  retryByHand,
  retryByHand,
  retryByHand,
  fc.constant(new CloseMidFlight()),
  fc.tuple(idx, skew).map(([i, ms]) => new SkewedDeferral(i, ms)),
  fc.constant(new Stall()),
  fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom<string | undefined>(undefined, 'image', 'video'))
    .map(([limit, kind]) => new WakeDeferred(limit, kind)),
  fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom<string | undefined>(undefined, 'image', 'video'))
    .map(([limit, kind]) => new WakeDeferred(limit, kind)),
  fc.integer({ min: 1, max: 3 }).map((limit) => new WakeGpu(limit)),
  fc.constant(new GateWindowEnds()),
  fc.constant(new GateWindowEnds()),
];

/**
 * Fixed openings that reach the bounds and the operator paths in every run
 * (a random draw reaches a limit rarely); each is also a prefix a random
 * case may start with.
 */
const pn = new ProcessNext();
const SCENARIOS: Cmd[][] = [
  // the capacity limit (DeferralLimitError), retried by hand keeping its attempts: a fresh chain defers again
  [
    new Enqueue(0),
    pn,
    new Expire(0, false),
    pn,
    new Expire(0, true),
    pn,
    new Expire(0, false),
    pn,
    new RetryByHand(0, false),
    new Stall(),
    new Expire(0, false),
    new CloseMidFlight(),
    pn,
  ],
  // the idempotent limit: done
  [new Script(1, 'idempotent'), new Enqueue(1), pn, new Expire(1, true), pn, new Expire(1, false), pn],
  // failed for good, retried with a reset (BullMQ retries its next failure) and without (the engine does)
  [
    new Script(2, 'failure'),
    new Enqueue(2),
    pn,
    pn,
    new RetryByHand(2, true),
    pn,
    pn,
    new RetryByHand(2, false),
    pn,
    new Script(2, 'dispatched'),
    pn,
  ],
  // cancelled after it failed, then retried by hand: completes as cancelled, calls nothing
  [new Script(3, 'failure'), new Enqueue(3), pn, pn, new Cancel(3), new RetryByHand(3, false), pn],
  // a retried job cancelled before it began
  [new Script(1, 'failure'), new Enqueue(1), pn, pn, new RetryByHand(1, true), new Cancel(1), pn, new Enqueue(1), pn],
  // close mid-flight, a stall, and skewed clocks each way
  [
    new Enqueue(0),
    new Enqueue(3),
    new CloseMidFlight(),
    new Stall(),
    pn,
    new SkewedDeferral(1, 5000),
    new SkewedDeferral(2, -5000),
    new Expire(1, false),
    new Stall(),
  ],
  // capacity returns for two deferred stages at once (a random case may never defer two before a wake):
  // two stages with no resource (b2's stages wait in the gpu's line, which a plain wake never reads)
  [
    new Script(0, 'capacity'),
    new Script(2, 'capacity'),
    new Enqueue(0),
    new Enqueue(2),
    pn,
    pn,
    new WakeDeferred(10, undefined),
    pn,
    pn,
  ],
  // the gpu: a video stage's capacity closes its gate, a b2 stage's answer naming it joins its line;
  // behind the closed gate a wake-up parks at once; once its window ended one probe asks, and its success
  // wakes capacityLeft of the line; a host's wake opens the gate; a success that saw no slot left closes it
  [
    new Enqueue(1),
    new Script(3, 'capacity', undefined, true),
    new Enqueue(3),
    new Enqueue(2),
    pn,
    pn,
    pn,
    new Expire(1, false),
    pn,
    new GateWindowEnds(),
    new Expire(3, false),
    new Script(3, 'dispatched', 1),
    pn,
    pn,
    new WakeGpu(1),
    new Script(1, 'dispatched', 0),
    pn,
    new Expire(2, false),
    pn,
  ],
  // a deferred stage's two rows no branch above asks for: a direct dispatch answers deferred, a clear makes it due
  [new Script(0, 'capacity'), new Enqueue(0), pn, new DirectDispatch(0), new Clear(['b1', 'c1']), pn],
];

describe('C14: the deferral contract, model-based', () => {
  let redis: IORedis;
  beforeAll(() => {
    redis = client();
  });
  afterAll(closeClients);

  it(
    'keeps exactly one way back per live stage and never calls the executor inside a window',
    async () => {
      const seed = seedFor('model');
      const numRuns = envInt('MODEL_RUNS', 40, 500);
      const maxCommands = envInt('MODEL_COMMANDS', 60, 120);
      const cases = fc
        .tuple(fc.constantFrom<Cmd[]>([], ...SCENARIOS), fc.commands(commands, { maxCommands, size: 'max' }))
        .map(([opening, rest]): Iterable<Cmd> => [...opening, ...rest]);
      await fc.assert(
        fc.asyncProperty(cases, async (cmds) => {
          executed.cases += 1;
          const { prefix, queueName } = isolated();
          const model: Model = {
            stages: REFS.map((ref) => ({
              ref,
              sid: sidOf(ref),
              state: 'idle',
              marker: false,
              cap: 0,
              idem: 0,
              failures: 0,
              bull: 0,
              queued: 'waiting',
              marks: [],
              next: 'capacity',
              gpu: needsGpu(ref),
            })),
            strays: new Set(),
            gate: 'open',
          };
          const real = {
            prefix,
            queueName,
            model,
            calls: [],
            violations: [],
            running: new Set(),
            fences: new Map(),
            action: 'start',
            seen: new Map(),
            involved: new Map(),
            redis,
            worker: newWorker({ prefix, queueName }),
          } as unknown as Real;
          real.engine = makeEngine(real);
          try {
            // each command names itself to the checks of the table
            const named = [...cmds].map((c): Cmd => ({
              check: (m) => c.check(m),
              run: async (m, r) => {
                r.action = String(c);
                await c.run(m, r);
              },
              toString: () => String(c),
            }));
            await fc.asyncModelRun(() => ({ model, real }), named);
          } finally {
            jest.restoreAllMocks();
            await real.worker.close();
            await real.engine.close();
            await dropPrefix(redis, prefix);
          }
        }),
        // every opening alone first, then the random cases
        { seed, numRuns, verbose: 1, examples: SCENARIOS.map((s): [Iterable<Cmd>] => [s]) },
      );

      console.log(
        `[reliability] model: ${executed.cases} cases (the ${SCENARIOS.length} fixed openings alone, then random ones, up to ${SCENARIOS[0]!.length} + ${maxCommands} commands each); ${executed.checked} steps checked against the model (+${executed.scripts} executor scripts); ${JSON.stringify(stats)}`,
      );
      // the bounds and every new operation's main branch were reached
      const reached = (branch: string) => ({ branch, reached: tallied(branch) > 0 });
      for (const branch of [
        'process:capacity:ended/limit',
        'process:idempotent:ended/done',
        'retry:keep:',
        'retry:reset:',
        'retry:keep:limit',
        'retry:cancelled:',
        'process:stray:cancelled',
        'cancel:after-failure',
        'close:interrupted:',
        'close:ran-again',
        'skew:ahead',
        'skew:behind',
        'stall:in-flight:',
        'stall:ran-after-lock',
        'wake:1',
        'wake:2',
        'process:gated:deferred',
        'gate-ends:closed',
        'line:woke:1',
        'line:woke:0:left0',
        'wake-gpu:1',
      ])
        expect(reached(branch)).toEqual({ branch, reached: true });
      // every row of docs/design.md's transition tables the model can take was taken; the others are named
      const rows = TABLE.map((mv, k) => ({ row: mv.row, taken: taken[k]! }));
      console.log(`[reliability] model: rows of docs/design.md taken: ${JSON.stringify(rows.map((x) => x.taken))}`);
      expect(rows.filter((x, k) => x.taken === 0 && !UNREACHED[TABLE[k]!.key])).toEqual([]);
      for (const key of Object.keys(UNREACHED) as Event[])
        expect({ key, rows: TABLE.filter((mv) => mv.key === key).length }).toEqual({ key, rows: 1 });
    },
    LONG_MS,
  );
});
