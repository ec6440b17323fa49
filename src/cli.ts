#!/usr/bin/env node
/**
 * `bullmq-stage-deferral`: the on-call engineer's view of a dispatch queue.
 *
 *   list [scope...]   deferred stages (all, or under a scope prefix)
 *   show <ref>        one stage: deferred, in flight, pending or idle
 *   clear <scope...>  end every deferral under a scope; the stages dispatch once, now
 *   cancel <ref>      end a stage's deferral and remove its wake-up
 *
 * Exit codes: 0 done, 1 a runtime error (e.g. Redis unreachable), 2 bad input.
 */
import { Command, CommanderError, Option } from 'commander';
import type { DeferralStore } from './deferral-store';
import type { DispatchEngine } from './engine';
import { isStageDeferralError } from './errors';
import { resolveOptions } from './options';
import { stageId } from './stage-ref';
import { formatRefText, parseRefText } from './cli/ref-text';
import { formatRemaining, renderTable } from './cli/table';
import type { DeferredStage, StageRef } from './types';

interface GlobalOptions {
  redis: string;
  queue: string;
  prefix: string;
  json: boolean;
}

/** What `show` prints (`--json`: this object). */
interface StageInfo {
  ref: string;
  scope: readonly string[];
  stage: string;
  stageId: string;
  state: 'deferred' | 'in_flight' | 'pending' | 'failed' | 'idle';
  reason?: string;
  class?: string;
  deferrals?: number;
  until?: string;
  remainingMs?: number;
  wakeUpJobId?: string;
  log?: string[];
  jobId?: string;
  jobState?: string;
  failedReason?: string;
}

interface RefOptions {
  scope?: string[];
  stage?: string;
}

/** Bad input: exit code 2, the message and nothing else. */
class UsageError extends Error {}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function resolveRef(text: string | undefined, opts: RefOptions): StageRef {
  const flags = opts.scope !== undefined || opts.stage !== undefined;
  if (text !== undefined && flags)
    throw new UsageError('Give the stage either as <ref> or as --scope/--stage, not both');
  if (text !== undefined) return parseRefText(text);
  if (!flags)
    throw new UsageError('Missing the stage: give <ref> (e.g. `book-1/ch-2:image`) or --scope ... --stage ...');
  if (opts.stage === undefined) throw new UsageError('Missing --stage <kind>');
  const ref = { scope: opts.scope ?? [], stage: opts.stage };
  stageId(ref);
  return ref;
}

async function withEngine<T>(g: GlobalOptions, run: (engine: DispatchEngine, store: DeferralStore) => Promise<T>) {
  // Loaded here, not at the top: help and bad input answer without loading BullMQ.
  const { default: IORedis } = await import('ioredis');
  const { createDispatchEngine } = await import('./engine');
  const { DeferralStore } = await import('./deferral-store');
  const redis = new IORedis(g.redis, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    retryStrategy: () => null,
  });
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => {
    lastError = error; // reported below, through the failed command
  });
  let engine: DispatchEngine | undefined;
  const connection = { connection: redis, queueName: g.queue, prefix: g.prefix, executor: neverDispatch };
  try {
    resolveOptions(connection); // bad --queue/--prefix: refused before connecting
    try {
      await redis.connect();
    } catch (error) {
      const cause = lastError ?? (error as Error);
      throw new Error(`Cannot connect to Redis at ${redactUrl(g.redis)}: ${cause.message}`);
    }
    // BullMQ's Queue writes `<prefix>:<queue>:meta` when it is missing: check first, so a
    // mistyped name is reported instead of creating an empty queue.
    if ((await redis.exists(`${g.prefix}:${g.queue}:meta`)) === 0) {
      throw new UsageError(
        `No BullMQ queue ${JSON.stringify(g.queue)} with prefix ${JSON.stringify(g.prefix)} at ${redactUrl(g.redis)} ` +
          `(no key ${g.prefix}:${g.queue}:meta); check --queue and --prefix`,
      );
    }
    engine = createDispatchEngine(connection);
    engine.queue.on('error', (error: Error) => {
      lastError ??= error;
    });
    return await run(engine, new DeferralStore(engine.queue));
  } finally {
    await engine?.close().catch(() => undefined);
    redis.disconnect();
  }
}

async function neverDispatch(): Promise<never> {
  throw new Error('The CLI never dispatches');
}

function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

function print(text: string) {
  process.stdout.write(`${text}\n`);
}

function deferredJson(d: DeferredStage, now: number) {
  return {
    ref: formatRefText(d.ref),
    scope: d.ref.scope,
    stage: d.ref.stage,
    reason: d.reason,
    class: d.class,
    deferrals: d.deferrals,
    until: new Date(d.until).toISOString(),
    remainingMs: Math.max(0, d.until - now),
    wakeUpJobId: d.wakeUpJobId,
  };
}

function where(g: GlobalOptions) {
  return `queue ${JSON.stringify(g.queue)}, prefix ${JSON.stringify(g.prefix)}`;
}

function hintSegments(scope: readonly string[]) {
  if (scope.some((s) => s.includes('/'))) {
    process.stderr.write(
      `note: each argument is one scope segment, taken as is; for the scope book-1 > ch-2 write \`book-1 ch-2\`\n`,
    );
  }
}

export function buildProgram(): Command {
  const program = new Command('bullmq-stage-deferral');
  program
    .description('Inspect and manage the deferred stages of a bullmq-stage-deferral dispatch queue.')
    .addOption(new Option('--redis <url>', 'Redis URL').env('REDIS_URL').default('redis://127.0.0.1:6379'))
    .option('--queue <name>', 'dispatch queue name', 'stage-dispatch')
    .option('--prefix <prefix>', 'BullMQ prefix', 'bull')
    .option('--json', 'print JSON instead of a table', false)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();

  const globals = () => program.opts<GlobalOptions>();

  program
    .command('list')
    .description('List deferred stages: reason, class, deferrals, until. Scope segments narrow it to a scope prefix.')
    .argument('[scope...]', 'scope segments, outermost first (each argument is one segment)')
    .action(async (scope: string[]) => {
      const g = globals();
      hintSegments(scope);
      const rows = await withEngine(g, (engine) => engine.listDeferred(scope));
      const now = Date.now();
      if (g.json)
        return print(
          JSON.stringify(
            rows.map((d) => deferredJson(d, now)),
            null,
            2,
          ),
        );
      if (rows.length === 0) {
        const under = scope.length > 0 ? ` under ${formatRefText({ scope, stage: '' }).slice(0, -1)}` : '';
        return print(`No deferred stages${under} (${where(g)}).`);
      }
      print(
        renderTable(
          ['STAGE', 'CLASS', 'REASON', 'DEFERRALS', 'UNTIL', 'IN'],
          rows.map((d) => [
            formatRefText(d.ref),
            d.class,
            d.reason,
            String(d.deferrals),
            new Date(d.until).toISOString(),
            formatRemaining(d.until - now),
          ]),
        ),
      );
    });

  program
    .command('show')
    .description('Show one stage: deferred (why, until when, its wake-up log), in flight, pending, failed or idle.')
    .argument('[ref]', 'stage ref, e.g. book-1/ch-2/sc-7:image (escape / : \\ inside a segment with \\)')
    .option('--scope <segment>', 'scope segment (repeat, outermost first)', collect)
    .option('--stage <kind>', 'stage kind')
    .action(async (text: string | undefined, opts: RefOptions) => {
      const g = globals();
      const ref = resolveRef(text, opts);
      const sid = stageId(ref);
      const info: StageInfo = await withEngine(g, async (engine, store) => {
        const now = Date.now();
        const probe = await store.probe(sid);
        const deferred = (await engine.listDeferred(ref.scope)).find((d) => stageId(d.ref) === sid);
        const base = { ref: formatRefText(ref), scope: ref.scope, stage: ref.stage, stageId: sid };
        if (deferred) {
          const logs = await engine.queue.getJobLogs(deferred.wakeUpJobId);
          return { ...base, ...deferredJson(deferred, now), state: 'deferred', log: logs.logs };
        }
        // the job that speaks for the stage: its pending wake-up, a wake-up that failed
        // for good (licence marked `?`), or the job `enqueue` added
        let jobId: string | null = probe.kind === 'licensed' ? probe.licence.replace(/[!?]$/, '') : null;
        if (!jobId && probe.kind === 'none') {
          const failed = (await store.licencesIn(`${sid}@`)).find((l) => l.endsWith('?'));
          if (failed) jobId = failed.slice(0, -1);
        }
        jobId ??= await engine.queue.getDeduplicationJobId(sid);
        const jobState = jobId ? await engine.queue.getJobState(jobId) : 'unknown';
        if (probe.kind === 'in_flight') return { ...base, state: 'in_flight' };
        if (!jobId || jobState === 'unknown' || jobState === 'completed') return { ...base, state: 'idle' };
        if (jobState !== 'failed') return { ...base, state: 'pending', jobId, jobState };
        const failedReason = (await engine.queue.getJob(jobId))?.failedReason;
        return { ...base, state: 'failed', jobId, jobState, ...(failedReason ? { failedReason } : {}) };
      });
      if (g.json) return print(JSON.stringify(info, null, 2));
      const rows: [string, string | undefined][] = [
        ['stage', info.ref],
        ['stage id', info.stageId],
        ['state', info.state],
        ['reason', info.reason],
        ['class', info.class],
        ['deferrals', info.deferrals === undefined ? undefined : String(info.deferrals)],
        ['until', info.until && `${info.until} (in ${formatRemaining(info.remainingMs ?? 0)})`],
        ['wake-up job', info.wakeUpJobId],
        ['job', info.jobId && `${info.jobId} (${info.jobState})`],
        ['failed', info.failedReason],
      ];
      const shown = rows.filter((r): r is [string, string] => r[1] !== undefined);
      const width = Math.max(...shown.map(([k]) => k.length));
      print(shown.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n'));
      if (info.log && info.log.length > 0) print(`log:\n${info.log.map((l) => `  ${l}`).join('\n')}`);
    });

  program
    .command('clear')
    .description('End every deferral under a scope prefix; those stages are dispatched once, now (by your workers).')
    .argument('<scope...>', 'scope segments, outermost first (each argument is one segment)')
    .action(async (scope: string[]) => {
      const g = globals();
      hintSegments(scope);
      stageId({ scope, stage: 'x' }); // validates the scope before connecting
      const count = await withEngine(g, (engine) => engine.clearDeferrals(scope));
      const label = formatRefText({ scope, stage: '' }).slice(0, -1);
      if (g.json) return print(JSON.stringify({ scope, cleared: count }));
      print(`Cleared ${count} deferral${count === 1 ? '' : 's'} under ${label} (${where(g)}).`);
    });

  program
    .command('cancel')
    .description("End a stage's deferral, remove its wake-up, and disarm a dispatch in flight.")
    .argument('[ref]', 'stage ref, e.g. book-1/ch-2/sc-7:image')
    .option('--scope <segment>', 'scope segment (repeat, outermost first)', collect)
    .option('--stage <kind>', 'stage kind')
    .option('--reason <text>', 'reason recorded with the cancel', 'cancelled from the CLI')
    .action(async (text: string | undefined, opts: RefOptions & { reason: string }) => {
      const g = globals();
      const ref = resolveRef(text, opts);
      const r = await withEngine(g, (engine) => engine.cancelActiveDispatch(ref, opts.reason));
      if (g.json) return print(JSON.stringify({ ref: formatRefText(ref), ...r }));
      const what = r.hadDeferral ? 'ended its deferral' : 'it had no deferral';
      const flight = r.inFlight ? '; a dispatch in flight was disarmed' : '';
      print(`Cancelled ${formatRefText(ref)}: ${what}${flight}; removed ${r.removedJobs} job(s).`);
    });

  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version print and end with code 0; usage errors are already printed
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof UsageError || (isStageDeferralError(error) && error.code.startsWith('INVALID_'))) {
      process.stderr.write(`error: ${(error as Error).message}\n`);
      return 2;
    }
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
