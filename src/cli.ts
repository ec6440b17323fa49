#!/usr/bin/env node
/**
 * `bullmq-stage-deferral`: the on-call engineer's view of a dispatch queue.
 *
 *   list [scope...]   deferred stages (all, or under a scope prefix; a page with --limit/--cursor)
 *   show <ref>        one stage: deferred, in flight, pending, failed or idle
 *   clear <scope...>  end every deferral under a scope; the stages dispatch once, now
 *   wake [scope...]   capacity returned: wake up to --limit deferred stages (--stage kind), longest-waiting first
 *   cancel <ref>      end a stage's deferral and remove its wake-up
 *   gates [resource...]  each resource's gate (open, closed until, probing) and how many wait in its line
 *
 * A stage is its id as Bull Board's job ids show it (`book-1/ch-2/sc-7/image`)
 * or `book-1/ch-2/sc-7:image`.
 *
 * Exit codes: 0 done; 1 a runtime error (Redis unreachable, or silent past
 * --timeout); 2 bad input (including a queue that is not a dispatch queue, and
 * a cancel that would remove a job that is not the engine's); 3 the stage or
 * scope (or resource) matched nothing (a typo, or nothing deferred there).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { isStageDeferralError } from './errors';
import { encodeResources } from './resource';
import { encodeStageKind, scopePrefix, stageId } from './stage-ref';
import { escapeControl } from './cli/escape';
import { CliError, NothingMatchedError, UsageError } from './cli/errors';
import { checkCancel } from './cli/guard';
import { deferredJson, listTable, print, shellQuote, showText, stageJson } from './cli/output';
import { gateJson, gatesTable } from './cli/gates';
import { readGates, type Scannable } from './store/gates';
import { readStage } from './cli/read';
import { isCursorOf, listStages, MAX_PAGE } from './store/listing';
import { redisTime } from './store/reader';
import { redactUrl, scrub, secretsOf } from './cli/redact';
import { formatRefText, parseStageArg } from './cli/ref-text';
import { withSession, type GlobalOptions } from './cli/session';
import type { StageRef } from './types';

interface RefOptions {
  scope?: string[];
  stage?: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('Expected a positive integer.');
  return n;
}

/** A page's `--limit`: 1..10,000, as `listDeferred` takes it. */
function pageLimit(value: string): number {
  const n = positiveInt(value);
  if (n > MAX_PAGE) throw new InvalidArgumentError(`Expected an integer from 1 to ${MAX_PAGE}.`);
  return n;
}

/** The version in the package's package.json (next to dist/ and src/). */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function resolveRef(text: string | undefined, opts: RefOptions): StageRef {
  const flags = opts.scope !== undefined || opts.stage !== undefined;
  if (text !== undefined && flags)
    throw new UsageError('Give the stage either as <ref> or as --scope/--stage, not both');
  if (text !== undefined) return parseStageArg(text);
  if (!flags)
    throw new UsageError(
      'Missing the stage: give <ref> (e.g. `book-1/ch-2/image` as job ids show it, or `book-1/ch-2:image`) or --scope ... --stage ...',
    );
  if (opts.stage === undefined) throw new UsageError('Missing --stage <kind>');
  const ref = { scope: opts.scope ?? [], stage: opts.stage };
  stageId(ref);
  return ref;
}

function where(g: GlobalOptions) {
  return `queue ${JSON.stringify(g.queue)}, prefix ${JSON.stringify(g.prefix)}`;
}

const scopeLabel = (scope: readonly string[]) => escapeControl(formatRefText({ scope, stage: '' }).slice(0, -1));

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
    .version(packageVersion(), '-V, --version', 'print the package version')
    .addOption(
      new Option('--redis <url>', 'Redis URL (with --cluster: one or more node URLs, comma-separated)')
        .env('REDIS_URL')
        .default('redis://127.0.0.1:6379'),
    )
    .option('--cluster', 'connect to a Redis Cluster through the node(s) in --redis', false)
    .option('--timeout <ms>', 'give up when Redis does not answer a command within this time', positiveInt, 5000)
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
    .option('--limit <n>', 'at most n stages (one page, 1..10000); prints the cursor of the next page', pageLimit)
    .option('--cursor <cursor>', 'continue after this cursor (printed by the previous page)')
    .action(async (scope: string[], opts: { limit?: number; cursor?: string }) => {
      const g = globals();
      hintSegments(scope);
      const prefix = scope.length === 0 ? '' : scopePrefix(scope);
      if (opts.cursor !== undefined && !isCursorOf(prefix, opts.cursor))
        throw new UsageError(`--cursor ${JSON.stringify(opts.cursor)} is not a cursor of this listing`);
      // (time left against Redis' clock, as `until` is: this machine's may be off)
      const { page, now } = await withSession(g, async (s) => ({
        page: await listStages(s.reader, s.keys, prefix, opts),
        now: await redisTime(s.reader),
      }));
      const paged = opts.limit !== undefined || opts.cursor !== undefined;
      if (g.json) {
        const rows = page.stages.map((d) => deferredJson(d, now));
        // without paging, the array of earlier versions; a page is an object with its cursor
        return print(JSON.stringify(paged ? { stages: rows, nextCursor: page.nextCursor } : rows, null, 2));
      }
      if (page.stages.length === 0) {
        const under = scope.length > 0 ? ` under ${scopeLabel(scope)}` : '';
        print(`No deferred stages${under}${paged ? ' in this page' : ''} (${where(g)}).`);
      } else print(listTable(page.stages, now));
      if (page.nextCursor !== null) print(`next page: --cursor ${shellQuote(page.nextCursor)}`);
    });

  program
    .command('show')
    .description('Show one stage: deferred (why, until when, its wake-up log), in flight, pending, failed or idle.')
    .argument('[ref]', 'the stage: its id as job ids show it (book-1/ch-2/sc-7/image) or book-1/ch-2/sc-7:image')
    .option('--scope <segment>', 'scope segment (repeat, outermost first)', collect)
    .option('--stage <kind>', 'stage kind')
    .action(async (text: string | undefined, opts: RefOptions) => {
      const g = globals();
      const ref = resolveRef(text, opts);
      const sid = stageId(ref);
      const { state, now } = await withSession(g, async (s) => ({
        state: await readStage(s.reader, s.keys, sid),
        now: await redisTime(s.reader),
      }));
      const base = { ref: formatRefText(ref), scope: ref.scope, stage: ref.stage, stageId: sid };
      const info = stageJson(base, state, now);
      print(g.json ? JSON.stringify(info, null, 2) : showText(info));
      if (state.state === 'idle')
        throw new NothingMatchedError(
          `Nothing is known of ${escapeControl(base.ref)} (${where(g)}): no deferral, no dispatch in flight, ` +
            "no job of the stage's own (a typo? a job added by hand without the contract's deduplication id is not looked for)",
        );
    });

  program
    .command('clear')
    .description(
      'Wake every deferred stage under a scope prefix: each deferral ends and the stage is dispatched once, now (by your workers).',
    )
    .argument('<scope...>', 'scope segments, outermost first (each argument is one segment)')
    .option('--dry-run', 'list the deferred stages it would wake, change nothing', false)
    .option('--yes', 'confirm a clear of a whole top-level scope (a book)', false)
    .action(async (scope: string[], opts: { dryRun: boolean; yes: boolean }) => {
      const g = globals();
      hintSegments(scope);
      stageId({ scope, stage: 'x' }); // validates the scope before connecting
      if (opts.dryRun) {
        // one page at most: the dry run's work and output stay bounded however many are deferred
        const page = await withSession(g, async (s) =>
          listStages(s.reader, s.keys, scopePrefix(scope), { limit: MAX_PAGE }),
        );
        const n = page.stages.length;
        const more = page.nextCursor !== null;
        if (g.json) print(JSON.stringify({ scope, wouldWake: page.stages.map((d) => formatRefText(d.ref)), more }));
        else {
          const what = `${n} deferred stage${n === 1 ? '' : 's'}${more ? ' and more' : ''}`;
          print(`Would wake ${what} under ${scopeLabel(scope)} (${where(g)})${n ? ':' : '.'}`);
          for (const d of page.stages) print(`  ${escapeControl(formatRefText(d.ref))}`);
          if (more) print(`  … and more: \`list ${scope.map(shellQuote).join(' ')} --limit …\` pages them all`);
        }
        if (n === 0) throw new NothingMatchedError(`No deferred stage under ${scopeLabel(scope)}`);
        return;
      }
      if (scope.length === 1 && !opts.yes)
        throw new UsageError(
          `clear ${scopeLabel(scope)} wakes every deferred stage of that whole scope: see them with --dry-run, then confirm with --yes`,
        );
      const count = await withSession(g, async (s) => (await s.engine()).clearDeferrals(scope));
      if (g.json) print(JSON.stringify({ scope, cleared: count }));
      else print(`Woke ${count} deferred stage${count === 1 ? '' : 's'} under ${scopeLabel(scope)} (${where(g)}).`);
      if (count === 0) throw new NothingMatchedError(`No deferred stage under ${scopeLabel(scope)}`);
    });

  program
    .command('wake')
    .description('Capacity returned: wake up to --limit capacity-deferred stages now, longest-waiting first.')
    .argument('[scope...]', 'scope segments, outermost first (each argument is one segment)')
    .option('--stage <kind>', 'only stages of this kind')
    .option('--limit <n>', 'wake at most n stages (1..10000)', positiveInt, 1)
    .action(async (scope: string[], opts: { stage?: string; limit: number }) => {
      const g = globals();
      hintSegments(scope);
      // checked before connecting: an empty --stage (an unset variable) is refused, not read as "any kind"
      if (opts.stage !== undefined) encodeStageKind(opts.stage);
      const filter = {
        limit: opts.limit,
        ...(scope.length ? { scope } : {}),
        ...(opts.stage !== undefined ? { stage: opts.stage } : {}),
      };
      // the CLI reports its wake itself, here: no other process reports it
      const { woken } = await withSession(g, async (s) => (await s.engine()).wakeDeferred(filter));
      if (g.json) print(JSON.stringify({ woken }));
      else {
        print(`Woke ${woken.length} stage${woken.length === 1 ? '' : 's'} (${where(g)})${woken.length ? ':' : '.'}`);
        for (const ref of woken) print(`  ${escapeControl(formatRefText(ref))}`);
      }
      if (woken.length === 0) throw new NothingMatchedError('No capacity-deferred stage matched');
    });

  program
    .command('cancel')
    .description("End a stage's deferral, remove its wake-up, and disarm a dispatch in flight.")
    .argument('[ref]', 'the stage: its id as job ids show it (book-1/ch-2/sc-7/image) or book-1/ch-2/sc-7:image')
    .option('--scope <segment>', 'scope segment (repeat, outermost first)', collect)
    .option('--stage <kind>', 'stage kind')
    .option('--reason <text>', 'reason recorded with the cancel', 'cancelled from the CLI')
    .action(async (text: string | undefined, opts: RefOptions & { reason: string }) => {
      const g = globals();
      const ref = resolveRef(text, opts);
      const label = formatRefText(ref);
      const { r, state } = await withSession(g, async (s) => {
        // never remove a job that is not the engine's: checked before any write
        await checkCancel(s.reader, s.keys, ref, stageId(ref), escapeControl(label));
        // (read first: a failed job of the stage the cancel reaches is kept, marked cancelled, no longer listed)
        const { state } = await readStage(s.reader, s.keys, stageId(ref));
        return { r: await (await s.engine()).cancelStage(ref, opts.reason), state };
      });
      const nothing = !r.hadDeferral && !r.inFlight && r.removedJobs === 0 && state === 'idle';
      if (g.json) print(JSON.stringify({ ref: label, ...r }));
      else if (!nothing) {
        const what = r.hadDeferral ? 'ended its deferral' : 'it had no deferral';
        const flight = r.inFlight ? '; a dispatch in flight was disarmed' : '';
        const failed = state === 'failed' ? '; its failed job will not dispatch it if retried' : '';
        print(`Cancelled ${escapeControl(label)}: ${what}${flight}${failed}; removed ${r.removedJobs} job(s).`);
      }
      if (nothing)
        throw new NothingMatchedError(
          `Nothing to cancel for ${escapeControl(label)} (${where(g)}): no deferral, no dispatch in flight, no job`,
        );
    });

  program
    .command('gates')
    .description("Show each resource's gate (open, closed until, probing) and how many stages are in its line.")
    .argument('[resource...]', 'resource names (all of them when none is given)')
    .action(async (names: string[]) => {
      const g = globals();
      const named = encodeResources(names, 'gates'); // before connecting
      const { rows, now } = await withSession(g, async (s) => ({
        rows: await readGates(s.redis as unknown as Scannable, s.reader, s.keys, named),
        now: await redisTime(s.reader),
      }));
      if (g.json)
        print(
          JSON.stringify(
            rows.map((r) => gateJson(r, now)),
            null,
            2,
          ),
        );
      else if (rows.length > 0) print(gatesTable(rows, now));
      const missing = names.filter((n) => !rows.some((r) => r.resource === n));
      if (names.length === 0 && rows.length === 0)
        throw new NothingMatchedError(`No resource has a gate or a line (${where(g)})`);
      if (missing.length > 0)
        throw new NothingMatchedError(
          `No gate and no line for ${missing.map((n) => escapeControl(JSON.stringify(n))).join(', ')} (${where(g)}): a typo, or nothing waits on it`,
        );
    });

  return program;
}

/** The credentials the command line or REDIS_URL may carry: masked in everything printed to stderr. */
function secretsIn(argv: readonly string[]): string[] {
  return [process.env.REDIS_URL ?? '', ...argv]
    .filter((a) => a.includes('://'))
    .flatMap((a) => secretsOf(a.replace(/^--redis=/, '')));
}

export async function main(argv: readonly string[]): Promise<number> {
  const secrets = secretsIn(argv);
  const say = (text: string) => process.stderr.write(`${scrub(escapeControl(text), secrets)}\n`);
  const program = buildProgram().configureOutput({
    writeErr: (text) => process.stderr.write(scrub(text, secrets)),
  });
  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version print and end with code 0; usage errors are already printed
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof NothingMatchedError) {
      say(error.message);
      return 3;
    }
    if (error instanceof UsageError || (isStageDeferralError(error) && error.code.startsWith('INVALID_'))) {
      say(`error: ${(error as Error).message}`);
      return 2;
    }
    const url = program.opts<GlobalOptions>().redis;
    const message = error instanceof Error ? error.message : String(error);
    say(`error: ${url ? message.split(url).join(redactUrl(url)) : message}`);
    if (error instanceof CliError && error.hint) say(error.hint);
    return 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // a socket left open by a silent server must not keep the process alive
    setTimeout(() => process.exit(code), 2000).unref();
  });
}
