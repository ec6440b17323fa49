import fc from 'fast-check';
import type IORedis from 'ioredis';
import type { DispatchEngine } from '../../src/engine';
import { stageIdOfJobId } from '../../src/stage-ref';
import type { StageRef } from '../../src/types';
import { client, closeClients, dropPrefix, isolated } from '../helpers/redis';
import { ManualWorker, answer, engineFor, envInt, seedFor, sidOf, type Outcome, LONG_MS } from './harness';

/**
 * Model-based test of the contract: random sequences of user and worker
 * actions run against the real engine (real Redis, real BullMQ, the real
 * processor) and a small in-memory model; after every step the Redis state
 * must match the model.
 */

const ATTEMPTS = 2;
const CAP_LIMIT = 3;
const IDEM_LIMIT = 2;

const REFS: StageRef[] = [
  { scope: ['b1', 'c1'], stage: 'image' },
  { scope: ['b1', 'c1'], stage: 'video' },
  { scope: ['b1', 'c2'], stage: 'image' },
  { scope: ['b2', 'c1'], stage: 'image' },
];
const SCOPES: string[][] = [['b1'], ['b1', 'c1'], ['b1', 'c2'], ['b2']];

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
  /** attemptsMade of the stage's current job. */
  attempts: number;
  /** What the executor answers next. */
  next: Outcome;
  /** The pending job failed (not for good) and holds the stage's licence while it waits out its backoff. */
  held?: boolean;
}
interface Model {
  stages: MStage[];
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
}

function fresh(s: MStage) {
  s.held = false;
  s.cap = 0;
  s.idem = 0;
  s.failures = 0;
  s.attempts = 0;
}

function makeEngine(real: Pick<Real, 'prefix' | 'queueName' | 'model' | 'calls' | 'violations'>) {
  return engineFor(real.prefix, real.queueName, {
    executor: async (ref) => {
      const s = real.model.stages.find((x) => x.sid === sidOf(ref))!;
      real.calls.push({ sid: s.sid, state: s.state });
      if (s.state === 'deferred') real.violations.push(`executor called for ${s.sid} inside its window`);
      if (s.state !== 'pending' && s.state !== 'wakeable')
        real.violations.push(`executor called for ${s.sid} in state ${s.state}`);
      return answer(s.next);
    },
    windows: { capacitySeconds: 600, idempotentSeconds: 600, jitter: 0 },
    retry: { attempts: ATTEMPTS, backoff: { type: 'fixed', delay: 0 } },
    limits: { maxCapacityDeferrals: CAP_LIMIT, maxIdempotentDeferrals: IDEM_LIMIT },
  });
}

const base = (r: Real) => `${r.prefix}:${r.queueName}:`;

async function licencesOf(r: Real, sid: string): Promise<string[]> {
  return r.redis.zrangebylex(`${base(r)}sd:licences`, `[${sid}@`, `[${sid}@\xff`);
}

/** The invariants, checked after every command. */
async function checkInvariants(m: Model, r: Real) {
  executed.checked += 1;
  expect(r.violations).toEqual([]);
  const jobs = await r.engine.queue.getJobs(['wait', 'delayed', 'active', 'prioritized']);
  for (const s of m.stages) {
    const ctx = `stage ${s.sid} (model: ${s.state}${s.end ? `/${s.end}` : ''})`;
    expect({ ctx, marker: (await r.redis.exists(r.engine.deferredStageKey(s.ref))) === 1 }).toEqual({
      ctx,
      marker: s.marker,
    });
    expect({ ctx, lock: await r.redis.exists(`${base(r)}sd:inflight:${s.sid}`) }).toEqual({ ctx, lock: 0 });
    // a licence marked `?` records a wake-up that failed for good: it holds nothing pending
    const lic = (await licencesOf(r, s.sid)).filter((l) => !l.endsWith('?'));
    const mine = jobs.filter((j) => stageIdOfJobId(j.id as string) === s.sid);
    const live = mine.filter((j) => (j.id as string).includes('@r.') || lic.some((l) => l.replace(/!$/, '') === j.id));
    const waysBack = s.state === 'pending' || s.state === 'deferred' || s.state === 'wakeable' ? 1 : 0;
    // exactly one way back for a stage that is neither ended nor idle; none otherwise
    expect({ ctx, waysBack: live.length, jobs: mine.length }).toEqual({ ctx, waysBack, jobs: waysBack });
    // a deferred or woken stage is held by one licence; an ended one by none
    expect({ ctx, licences: lic.length }).toEqual({
      ctx,
      licences: s.state === 'deferred' || s.state === 'wakeable' || (s.state === 'pending' && s.held) ? 1 : 0,
    });
    if (s.state === 'deferred') expect({ ctx, st: await live[0]!.getState() }).toEqual({ ctx, st: 'delayed' });
    if (s.state === 'pending' || s.state === 'wakeable')
      expect({ ctx, st: await live[0]!.getState() }).toEqual({ ctx, st: 'waiting' });
  }
}

/** What the runs covered, printed at the end (and quoted in docs/reliability.md). */
const stats: Record<string, number> = {};
/** Commands run: those followed by an invariant check, and executor scripts. */
const executed = { checked: 0, scripts: 0 };
const tally = (what: string) => (stats[what] = (stats[what] ?? 0) + 1);

type Cmd = fc.AsyncCommand<Model, Real, false>;

class Enqueue implements Cmd {
  constructor(readonly i: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = m.stages[this.i]!;
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
    }
    await checkInvariants(m, r);
  }
  toString = () => `enqueue(${this.i})`;
}

class Script implements Cmd {
  constructor(
    readonly i: number,
    readonly outcome: Outcome,
  ) {}
  check = () => true;
  async run(m: Model) {
    m.stages[this.i]!.next = this.outcome;
    executed.scripts += 1;
  }
  toString = () => `script(${this.i}, ${this.outcome})`;
}

class ProcessNext implements Cmd {
  check = () => true;
  async run(m: Model, r: Real) {
    const before = r.calls.length;
    const out = await r.worker.processNext(r.engine);
    if (!out) {
      expect(m.stages.filter((s) => s.state === 'pending' || s.state === 'wakeable').map((s) => s.sid)).toEqual([]);
      await checkInvariants(m, r);
      return;
    }
    const s = m.stages.find((x) => x.sid === stageIdOfJobId(out.job.id as string))!;
    expect({ job: out.job.id, state: s.state }).toEqual({
      job: out.job.id,
      state: expect.stringMatching(/^(pending|wakeable)$/),
    });
    expect(r.calls.length - before).toBe(1);
    s.marker = false;
    const st = await r.engine.queue.getJobState(out.job.id as string);
    switch (s.next) {
      case 'dispatched':
        expect(out.result).toMatchObject({ dispatched: true });
        s.state = 'ended';
        s.end = 'dispatched';
        break;
      case 'capacity':
      case 'idempotent': {
        const cap = s.next === 'capacity';
        const count = (cap ? s.cap : s.idem) + 1;
        if (count > (cap ? CAP_LIMIT : IDEM_LIMIT)) {
          s.state = 'ended';
          if (cap) {
            s.end = 'limit';
            expect(out.error?.message).toMatch(/deferred \d+ times in a row/);
            expect(st).toBe('failed');
          } else {
            s.end = 'done';
            expect(out.result).toMatchObject({ completed: true, dispatched: false });
          }
        } else {
          expect(out.result).toMatchObject({ dispatched: false, retryable: true, until: expect.any(Number) });
          if (cap) s.cap = count;
          else s.idem = count;
          s.failures += s.attempts;
          s.attempts = 0;
          s.held = false;
          s.state = 'deferred';
          s.marker = true;
        }
        break;
      }
      case 'failure': {
        const spent = s.failures + s.attempts + 1;
        expect(out.error).toBeDefined();
        if (spent >= ATTEMPTS) {
          expect(st).toBe('failed');
          s.state = 'ended';
          s.end = 'failed';
        } else {
          expect(st).toBe('waiting');
          s.attempts += 1;
          s.held = true;
        }
        break;
      }
    }
    tally(`process:${s.next}:${s.state}${s.end ? `/${s.end}` : ''}`);
    if (s.state === 'ended') fresh(s);
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
    const [lic] = await licencesOf(r, s.sid);
    const job = await r.engine.queue.getJob(lic!.replace(/!$/, ''));
    await job!.promote();
    if (this.dropMarker) {
      await r.redis.del(r.engine.deferredStageKey(s.ref));
      s.marker = false;
    }
    s.state = 'wakeable';
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
    const res = await r.engine.cancelActiveDispatch(s.ref, 'user');
    tally(`cancel:${s.state}`);
    const open = s.state === 'pending' || s.state === 'deferred' || s.state === 'wakeable';
    expect(res).toMatchObject({ hadDeferral: s.marker, inFlight: false, removedJobs: open ? 1 : 0 });
    if (open) {
      s.state = 'ended';
      s.end = 'cancelled';
      s.marker = false;
      fresh(s);
    }
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
      s.marker = false;
      s.state = 'wakeable';
      fresh(s);
    }
    await checkInvariants(m, r);
  }
  toString = () => `clear(${JSON.stringify(this.scope)})`;
}

class Restart implements Cmd {
  check = () => true;
  async run(m: Model, r: Real) {
    await r.worker.close();
    await r.engine.close();
    r.engine = makeEngine(r);
    r.worker = new ManualWorker(r.queueName, r.prefix);
    await checkInvariants(m, r);
  }
  toString = () => 'restart()';
}

const idx = fc.integer({ min: 0, max: REFS.length - 1 });
const outcome = fc.constantFrom<Outcome>('dispatched', 'capacity', 'idempotent', 'failure');
const script = fc.tuple(idx, outcome).map(([i, o]) => new Script(i, o));
const expire = fc.tuple(idx, fc.boolean()).map(([i, d]) => new Expire(i, d));
const enqueue = idx.map((i) => new Enqueue(i));
const processNext = fc.constant(new ProcessNext());
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
];

describe('the deferral contract, model-based', () => {
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
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands, size: 'max' }), async (cmds) => {
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
              attempts: 0,
              next: 'capacity',
            })),
          };
          const shared = { prefix, queueName, model, calls: [], violations: [] };
          const real: Real = {
            ...shared,
            redis,
            engine: makeEngine(shared),
            worker: new ManualWorker(queueName, prefix),
          };
          try {
            await fc.asyncModelRun(() => ({ model, real }), cmds);
          } finally {
            await real.worker.close();
            await real.engine.close();
            await dropPrefix(redis, prefix);
          }
        }),
        { seed, numRuns, verbose: 1 },
      );

      console.log(
        `[reliability] model: ${numRuns} cases, up to ${maxCommands} commands each; ${executed.checked} steps checked against the model (+${executed.scripts} executor scripts); ${JSON.stringify(stats)}`,
      );
    },
    LONG_MS,
  );
});
