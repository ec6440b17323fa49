import type IORedis from 'ioredis';
import {
  createDispatchEngine,
  type DispatchEngine,
  type DispatchEngineOptions,
  type ExecutorResult,
  type StageRef,
} from '../../src';
import { client, closeClients, connect, dropPrefix, isolated, keysUnder, onCluster, redisOptions } from './redis';

/** Windows of 10 min, no jitter: a deferral the test reads is still open then, however slow the machine. */
export const LONG_WINDOWS = { capacitySeconds: 600, jitter: 0 };

export const SENT: ExecutorResult<string> = { dispatched: true, jobs: 1, reason: null };
export const notSent = (reason: string, extra: Partial<ExecutorResult<string>> = {}): ExecutorResult<string> => ({
  dispatched: false,
  jobs: 0,
  reason,
  ...extra,
});

export type Answer = ExecutorResult<string> | Error | (() => Promise<ExecutorResult<string>>);

/** One call of a `ScriptedExecutor`: what it was given, when, and what it answered (once it has). */
export interface ExecutorCall {
  ref: StageRef;
  payload: unknown;
  buildId?: string;
  force: boolean;
  fencingToken: number;
  /** `Date.now()` when the call started. */
  at: number;
  /** The answer, once given (not set for a thrown error). */
  result?: ExecutorResult<string>;
}

/**
 * An executor whose answers a test scripts per stage; records every call.
 * `script(ref, ...)` queues answers for one stage; `plan(ref)`, if given, is
 * asked once per stage, at its first call, for the answers of that stage.
 * With no scripted answer left it answers `fallback`. The one scripted
 * executor of the tests (the fleet's child workers answer from a seeded
 * function in their own process: test/reliability/child-worker.ts).
 */
export class ScriptedExecutor {
  readonly calls: ExecutorCall[] = [];
  private readonly answers = new Map<string, Answer[]>();
  private readonly planned = new Set<string>();

  constructor(
    public fallback: ExecutorResult<string> = SENT,
    private readonly plan?: (ref: StageRef) => Answer[],
  ) {}

  script(ref: StageRef, ...answers: Answer[]): this {
    this.answers.set(key(ref), [...(this.answers.get(key(ref)) ?? []), ...answers]);
    return this;
  }

  callsFor(ref: StageRef): number {
    return this.callsOf(ref).length;
  }

  /** The calls for one stage, in order. */
  callsOf(ref: StageRef): ExecutorCall[] {
    return this.calls.filter((c) => key(c.ref) === key(ref));
  }

  readonly fn = async (
    ref: StageRef,
    payload: unknown,
    ctx: { buildId?: string; force: boolean; fencingToken: number },
  ): Promise<ExecutorResult<string>> => {
    const call: ExecutorCall = {
      ref,
      payload,
      buildId: ctx.buildId,
      force: ctx.force,
      fencingToken: ctx.fencingToken,
      at: Date.now(),
    };
    this.calls.push(call);
    const k = key(ref);
    if (this.plan && !this.planned.has(k)) {
      this.planned.add(k);
      this.answers.set(k, [...this.plan(ref), ...(this.answers.get(k) ?? [])]);
    }
    const next = this.answers.get(k)?.shift() ?? this.fallback;
    if (next instanceof Error) throw next;
    call.result = typeof next === 'function' ? await next() : next;
    return call.result;
  };
}

function key(ref: StageRef): string {
  return JSON.stringify([ref.scope, ref.stage]);
}

export interface Harness {
  engine: DispatchEngine;
  executor: ScriptedExecutor;
  redis: IORedis;
  prefix: string;
  queueName: string;
  rollbacks: { ref: StageRef; reason: string }[];
  journal: { ref: StageRef; event: unknown }[];
}

const engines: DispatchEngine[] = [];
const prefixes: string[] = [];
/** Set by `harness()`, cleared by `teardown()`: something of this test's is still open. */
let open = false;

/**
 * `harness()` tears itself down: importing this module in a jest test file
 * registers (once per file: jest loads modules afresh for each file) an
 * `afterEach` that runs `teardown()` when the test made a harness. A file
 * need not call `teardown()` itself; one that does is not harmed (it is
 * idempotent). Jest runs a file's top-level `afterEach` hooks in the order
 * they were declared, and this one is declared by the import, so it runs
 * first: a test that must undo something before the engines close (a spy)
 * undoes it in the test (try/finally). Outside jest (a child process) there
 * is no `afterEach` and nothing is registered.
 */
if (typeof afterEach === 'function') {
  afterEach(async () => {
    if (open) await teardown();
  });
}

/**
 * An engine on its own prefix and queue (or on `shared`'s, for a second host
 * of one queue), with a scripted executor. Call it in a test (or a
 * `beforeEach`), not in `beforeAll`: it is torn down after each test.
 */
export function harness(
  overrides: Partial<DispatchEngineOptions> = {},
  shared?: { prefix: string; queueName: string },
): Harness {
  const { prefix, queueName } = shared ?? isolated();
  const executor = new ScriptedExecutor();
  const rollbacks: Harness['rollbacks'] = [];
  const journal: Harness['journal'] = [];
  const engine = createDispatchEngine({
    // on a cluster run: an ioredis Cluster (the engine never closes it; closeClients() does)
    connection: onCluster ? connect() : redisOptions(),
    prefix,
    queueName,
    executor: executor.fn,
    rollback: async (ref, reason) => {
      rollbacks.push({ ref, reason });
    },
    journal: async (ref, event) => {
      journal.push({ ref, event });
    },
    windows: { capacitySeconds: 30, idempotentSeconds: 120, jitter: 0 },
    ...overrides,
  });
  engines.push(engine);
  if (!prefixes.includes(prefix)) prefixes.push(prefix);
  open = true;
  return { engine, executor, redis: client(), prefix, queueName, rollbacks, journal };
}

/**
 * Closes every engine and client the test opened and deletes its keys. Runs
 * by itself after each test that called `harness()`; calling it again is a
 * no-op (but for closing the clients of `helpers/redis`).
 */
export async function teardown(): Promise<void> {
  open = false;
  await Promise.all(engines.splice(0).map((e) => e.close()));
  const redis = client();
  for (const prefix of prefixes.splice(0)) await dropPrefix(redis, prefix);
  await closeClients();
}

/**
 * Everything under the prefix: each key's serialized value and TTL. Two equal
 * snapshots (TTLs only counting down) mean nothing under the prefix was
 * written in between. (The server-wide write counter cannot be used: other
 * test files write to the same Redis in parallel.)
 */
export async function snapshot(redis: IORedis, prefix: string): Promise<Map<string, { dump: string; pttl: number }>> {
  const out = new Map<string, { dump: string; pttl: number }>();
  for (const key of await keysUnder(redis, prefix)) {
    const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
    // a hash too large for a listpack is a hash table, whose DUMP order a mere read can change
    // (an incremental rehash step): compare its fields, sorted
    const dump =
      type === 'hash'
        ? JSON.stringify(Object.entries(await redis.hgetall(key)).sort(([a], [b]) => (a < b ? -1 : 1)))
        : ((await redis.dumpBuffer(key))?.toString('hex') ?? '');
    out.set(key, { dump, pttl });
  }
  return out;
}

/**
 * A marker's PTTL read just after its deferral: live, and no longer than the window `ms`, give or
 * take how far this host's estimate of Redis' clock (`src/store/clock.ts`: half its tightest round
 * trip, wide on a loaded machine) ran ahead when it stamped the window's end.
 */
export function expectWindowLeft(pttl: number, ms: number): void {
  expect({ pttl, live: pttl > 0, within: pttl <= ms + CLOCK_ESTIMATE_SLACK_MS }).toEqual({
    pttl,
    live: true,
    within: true,
  });
}
/**
 * What {@link expectWindowLeft} allows over a window: the estimate's error on a busy machine (the
 * 11.2 ladder test once read a 1 s window as 1,00x ms), small enough that a window 45 ms too long
 * fails (50 ms let it pass).
 */
export const CLOCK_ESTIMATE_SLACK_MS = 10;

export function expectUnwritten(
  before: Map<string, { dump: string; pttl: number }>,
  after: Map<string, { dump: string; pttl: number }>,
): void {
  expect([...after.keys()]).toEqual([...before.keys()]);
  for (const [key, was] of before) {
    const now = after.get(key)!;
    expect({ key, dump: now.dump }).toEqual({ key, dump: was.dump });
    expect(now.pttl).toBeLessThanOrEqual(was.pttl);
  }
}

/**
 * An engine made by hand, not by `harness()`, for every test of a file:
 * open it in `beforeAll`, close it with `closeFileEngine` in `afterAll`. On
 * `names`' prefix and queue, with a 300 s capacity window (no jitter) and an
 * executor that answers `no_worker_available`, unless `options` says
 * otherwise. The CLI tests fill the queue the CLI binary reads with it.
 */
export function fileEngine(
  names: { prefix: string; queueName: string },
  options: Partial<DispatchEngineOptions> = {},
): DispatchEngine {
  return createDispatchEngine({
    connection: client(),
    ...names,
    windows: { capacitySeconds: 300, jitter: 0 },
    executor: async () => notSent('no_worker_available'),
    ...options,
  });
}

/** Closes a `fileEngine`, deletes the keys under its prefix and closes the test's clients. */
export async function closeFileEngine(engine: DispatchEngine, prefix: string): Promise<void> {
  await engine.close();
  await dropPrefix(client(), prefix);
  await closeClients();
}
