/**
 * Mutation testing of the engine's Lua: the .lua files in src/lua (one script each, e.g.
 * batch.lua, script `BATCH`; enqueue-probe.lua, `ENQUEUE_PROBE`) and their includes in
 * src/lua/includes (script `INCLUDES/<NAME>`, whose mutants run the suites of `HELPERS`). The
 * engine runs their flattened text from src/lua/generated.ts (scripts/gen-lua.ts).
 * Stryker sees each script as one string literal, so this script mutates the
 * Lua itself, line by line (block comments `--[[ ... ]]` skipped):
 *   delete  the line is blanked (statements only: a line that opens or closes
 *           a block would only make a syntax error)
 *   flip    one comparison is negated (`==`/`~=`, `<`/`>=`, `>`/`<=`),
 *           outside string literals and comments
 * and runs the core suites (after the script's own, `OWN`) against each mutant in a sandbox copy of the
 * project (src/ in the work tree is never written). A mutant is killed when a
 * suite fails, timed out when the run exceeds --timeout, survived otherwise. A mutant is
 * written to the sandbox's .lua file and its generated.ts made again; one whose scripts Redis will
 * not load (SCRIPT LOAD refuses it: a syntax error) is a compile error, not run and left out of the
 * score, as Stryker does.
 *
 *   npm run test:mutation:lua                      # every mutant
 *   npm run test:mutation:lua -- --script DEFER,CANCEL --ops flip
 *   npm run test:mutation:lua -- --script ENQUEUE_PROBE   # the shipped probe only
 *   npm run test:mutation:lua -- --resume          # reuse reports/lua-mutation.json
 *   npm run test:mutation:lua -- --list            # print the mutants, run nothing
 *   npm run test:mutation:lua -- --id INCLUDES/LICENCES:30:delete --tests test/contract/C16-retry-by-hand/retry-completed.test.ts
 *                                                  # one mutant against one suite (a check: the report is not written)
 *   npm run test:mutation:lua -- --skip test/a.test.ts,...   # leave suites out (the report's hash changes with them)
 *   options: --workers N (jest workers, 2), --timeout MS (a whole run: 3 x the baseline, at least 60 s),
 *            --test-timeout MS (jest's per test, 15 s), --limit N, --id ID,... (mutants by id, as --list prints them)
 *
 * --resume matches earlier results to the mutants by script and line text (not by line number, which
 * drifts when the file changes elsewhere). Killed and timed-out results are reused (a test added can
 * kill more, not fewer); a survivor only if measured with the suites as they are now (each row keeps
 * the hash of its suites), else it is run again.
 *
 * The baseline runs the suites of the scripts selected (all of them without --script).
 * Results: reports/lua-mutation.json (committed), one row per mutant.
 * The suites run against a private redis-server the run starts (and restarts when a mutant's
 * endless script leaves it busy), never the shared one.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { constantOf, flatten, generatedModule, scriptFiles } from './gen-lua';
import { PrivateRedis, waitForPong } from '../test/helpers/private-redis';

const ROOT = resolve(__dirname, '..');
const LUA = 'src/lua';
/** The Lua files mutated: every script, then every include. */
const SOURCES = [
  ...scriptFiles(join(ROOT, LUA)).map((f) => `${LUA}/${f}`),
  ...scriptFiles(join(ROOT, LUA, 'includes')).map((f) => `${LUA}/includes/${f}`),
];
const PROBE_SCRIPT = 'ENQUEUE_PROBE';
/** The scripts' flattened text (scripts/gen-lua.ts), which the engine runs. */
const GENERATED = `${LUA}/generated.ts`;
/** The script name of a Lua file: `BATCH` for src/lua/batch.lua, `INCLUDES/LICENCES` for an include. */
const scriptOf = (file: string) => constantOf(file.slice(LUA.length + 1));
/** The suites one suite was split into by clause: they run together wherever it ran. */
const DISPATCH_EDGES = [
  'test/contract/C12-one-in-flight/dispatch-edges.test.ts',
  'test/contract/C9-cancel/cancel-aborts-signal.test.ts',
  'test/contract/C24-close/close-aborts-attempts.test.ts',
  'test/contract/C13-fencing/lock-lost-then-threw.test.ts',
  'test/contract/C11-retry-budget/failure-takes-stage.test.ts',
  'test/contract/C5-outcomes/dispatch-answers.test.ts',
  'test/contract/C24-close/close-during-executor.test.ts',
  'test/contract/C13-fencing/lock-lost-answers.test.ts',
  'test/contract/C1-deferral/deferral-answers.test.ts',
];
const PROCESSOR = [
  'test/contract/C11-retry-budget/processor-backoff.test.ts',
  'test/contract/C2-no-side-effect/job-never-forced.test.ts',
  'test/contract/C12-one-in-flight/lock-outlives-bullmq-finish.test.ts',
  'test/contract/C13-fencing/lapsed-bullmq-lock.test.ts',
  'test/contract/C17-promote-remove/hash-deleted-while-running.test.ts',
  'test/contract/C24-close/closed-engine-refuses-jobs.test.ts',
  'test/contract/C27-costs/finished-mark-cost.test.ts',
];
const ENGINE_EDGES = [
  'test/contract/C25-start-up/engine-edges.test.ts',
  'test/contract/C24-close/close-own-connections.test.ts',
  'test/contract/C14-crash-recovery/stalled-failed-for-good.test.ts',
  'test/contract/C19-producer-contract/stalled-malformed-leaves-nothing.test.ts',
  'test/contract/C22-bad-input/malformed-filters.test.ts',
  'test/contract/C23-observability/cancel-enqueue-report.test.ts',
];
const WAKE_DEFERRED = [
  'test/contract/C8-wake-deferred/wake-deferred.test.ts',
  'test/contract/C8-wake-deferred/wait-index.test.ts',
  'test/contract/C4-windows/adaptive-and-hints.test.ts',
];
/** The resource gates and lines (C31): a resource's gate, its line, its wakes. */
const GATES = [
  'test/contract/C31-resource-gates/gated-dispatch.test.ts',
  'test/contract/C31-resource-gates/wake-bound.test.ts',
  'test/contract/C31-resource-gates/gate-edges.test.ts',
  'test/contract/C31-resource-gates/line-order.test.ts',
  'test/contract/C31-resource-gates/line-past-ended-chains.test.ts',
  'test/contract/C27-costs/resource-lines.test.ts',
  'test/contract/C31-resource-gates/cancel-clear-bounds.test.ts',
  'test/contract/C31-resource-gates/probe-races.test.ts',
  'test/contract/C31-resource-gates/named-by-answer.test.ts',
  'test/contract/C31-resource-gates/bad-input.test.ts',
];
/** Failed-job records and licences at a chain's end, a retry by hand, a redelivery. */
const RECORDS = [
  'test/contract/C16-retry-by-hand/success-beside-failed-record.test.ts',
  'test/contract/C16-retry-by-hand/retry-all-failed.test.ts',
  'test/contract/C16-retry-by-hand/superseded-retry.test.ts',
  'test/contract/C16-retry-by-hand/retry-while-success-runs.test.ts',
  'test/contract/C16-retry-by-hand/unattached-retry-after-chain-end.test.ts',
  'test/contract/C14-crash-recovery/record-beside-licence.test.ts',
  'test/contract/C14-crash-recovery/own-worker-stalled.test.ts',
  'test/contract/C14-crash-recovery/handed-on-retry.test.ts',
  'test/contract/C27-costs/kept-licence-holder.test.ts',
  'test/contract/C6-sent-stays-sent/release-reply-lost.test.ts',
  'test/contract/C27-costs/chain-end-records.test.ts',
  'test/contract/C16-retry-by-hand/retry-wake-up-failed-by-bullmq.test.ts',
  'test/contract/C16-retry-by-hand/retried-wake-up-fresh-chain.test.ts',
  'test/contract/C14-crash-recovery/handed-on-chain-end.test.ts',
  'test/contract/C27-costs/removed-while-failing.test.ts',
  'test/contract/C8-wake-deferred/job-failed-beside-deferral.test.ts',
];
/**
 * The scripts called directly with their KEYS and ARGV (all but the probe and the permission check):
 * the quickest suite to fail, so it runs first.
 */
const DIRECT = 'test/contract/C27-costs/scripts-direct.test.ts';
const NOT_DIRECT = new Set(['PERMISSIONS', 'ENQUEUE_PROBE']);
const CORE = [
  'test/contract/C19-producer-contract/retrying-job-holds-stage.test.ts',
  'test/contract/C6-sent-stays-sent/revoked-licence.test.ts',
  'test/contract/C18-enqueue/enqueued-defer-then-threw.test.ts',
  'test/contract/C9-cancel/cancel-from-another-host.test.ts',
  'test/contract/C8-wake-deferred/wait-index-chain-end.test.ts',
  'test/contract/C9-cancel/cancel-hand-added.test.ts',
  'test/contract/C16-retry-by-hand/producer-job-fails-for-good.test.ts',
  'test/contract/C11-retry-budget/licence-keeps-chain.test.ts',
  'test/contract/C1-deferral/dispatch.test.ts',
  'test/contract/C2-no-side-effect/while-deferred.test.ts',
  'test/contract/C28-views/deferred-stage-key.test.ts',
  'test/contract/C12-one-in-flight/in-flight.test.ts',
  'test/contract/C5-outcomes/results-not-exceptions.test.ts',
  'test/contract/C23-observability/dispatch-events.test.ts',
  'test/contract/C9-cancel/cancel-and-clear.test.ts',
  'test/contract/C10-clear/clear.test.ts',
  'test/contract/C9-cancel/cancel-races.test.ts',
  'test/contract/C10-clear/clear-wake-up-race.test.ts',
  'test/contract/C3-wake-up-runs/window-edge.test.ts',
  'test/contract/C13-fencing/lock-expired-races.test.ts',
  'test/contract/C13-fencing/frozen-before-begin.test.ts',
  'test/contract/C3-wake-up-runs/worker.test.ts',
  'test/contract/C11-retry-budget/budget-across-deferrals.test.ts',
  'test/contract/C7-deferral-limits/limits.test.ts',
  'test/contract/C9-cancel/cancel-after-terminal-failure.test.ts',
  'test/contract/C19-producer-contract/malformed-job-data.test.ts',
  'test/contract/C16-retry-by-hand/operator-paths.test.ts',
  'test/contract/C11-retry-budget/ticks-keep-budget.test.ts',
  'test/contract/C7-deferral-limits/retry-after-limit.test.ts',
  'test/contract/C24-close/close-loses-nothing.test.ts',
  'test/contract/C13-fencing/fencing-tokens.test.ts',
  'test/contract/C4-windows/redis-clock-windows.test.ts',
  'test/contract/C9-cancel/cancel-reaches-executor.test.ts',
  'test/contract/C22-bad-input/refused-up-front.test.ts',
  'test/contract/C1-deferral/journal-throws.test.ts',
  'test/contract/C23-observability/bound-and-hook-events.test.ts',
  'test/contract/C3-wake-up-runs/defer-then-throw.test.ts',
  'test/contract/C11-retry-budget/job-retry-options.test.ts',
  'test/contract/C14-crash-recovery/crash-recovery.test.ts',
  'test/contract/C16-retry-by-hand/retry-completed.test.ts',
  'test/contract/C19-producer-contract/hand-added-refused.test.ts',
  'test/contract/C20-stage-ids/refused-job-ids.test.ts',
];
/**
 * Suites run before the core ones for a script's mutants: those that reach what the core
 * suites do not (wakeDeferred, the start-up ACL check, the renewal, the job-tied lock). The CLI's
 * suites in test/cli run the built CLI, dist/cli.js, which the sandbox does not build: they are left
 * out.
 */
const OWN: Record<string, string[]> = {
  WAKE: [...GATES, ...WAKE_DEFERRED],
  PERMISSIONS: ['test/contract/C25-start-up/permissions.test.ts', 'test/contract/C25-start-up/acl.test.ts'],
  EXTEND: [
    'test/contract/C12-one-in-flight/lock-renewal.test.ts',
    ...DISPATCH_EDGES,
    'test/contract/C12-one-in-flight/job-lock.test.ts',
  ],
  DEFER: [
    ...GATES,
    'test/contract/C8-wake-deferred/wake-skips-hinted.test.ts',
    ...DISPATCH_EDGES,
    ...WAKE_DEFERRED,
    'test/contract/C12-one-in-flight/in-flight-retry.test.ts',
    'test/reliability/replay.test.ts',
    'test/contract/C12-one-in-flight/job-lock.test.ts',
  ],
  CANCEL: [...GATES, ...WAKE_DEFERRED, ...DISPATCH_EDGES, 'test/contract/C27-costs/failed-records.test.ts'],
  CLEAR: [...GATES, ...WAKE_DEFERRED],
  REPLACE: ['test/contract/C18-enqueue/replace-payload.test.ts', 'test/contract/C18-enqueue/replace-guards.test.ts'],
  FAIL: [
    ...RECORDS,
    ...PROCESSOR,
    'test/contract/C27-costs/failed-records.test.ts',
    // a sandboxed processor's failure, recorded by the child, then FAIL again by the parent after BullMQ removed the job
    'test/contract/C16-retry-by-hand/sandboxed-remove-on-fail.test.ts',
    ...ENGINE_EDGES,
    'test/reliability/terminal-failure.test.ts',
  ],
  // the shared helpers (liveLock, the tied lock's rules) and the hot path reach every suite above
  HELPERS: [
    ...GATES,
    'test/contract/C12-one-in-flight/job-lock.test.ts',
    ...DISPATCH_EDGES,
    ...PROCESSOR,
    ...WAKE_DEFERRED,
    'test/contract/C12-one-in-flight/lock-renewal.test.ts',
  ],
  BATCH: [
    'test/contract/C13-fencing/batch-fence.test.ts',
    ...GATES,
    ...RECORDS,
    'test/contract/C17-promote-remove/removed-wake-up-producer-job.test.ts',
    'test/contract/C16-retry-by-hand/producer-job-fails-for-good.test.ts',
    'test/contract/C12-one-in-flight/kept-job-frozen.test.ts',
    'test/contract/C14-crash-recovery/handed-on-before-move.test.ts',
    'test/contract/C27-costs/batch-one-call.test.ts',
    'test/contract/C25-start-up/shared-client-scripts.test.ts',
    'test/contract/C12-one-in-flight/job-lock.test.ts',
    ...DISPATCH_EDGES,
    ...PROCESSOR,
    'test/contract/C12-one-in-flight/in-flight-retry.test.ts',
    ...WAKE_DEFERRED,
    'test/contract/C27-costs/failed-records.test.ts',
    ...ENGINE_EDGES,
  ],
  // the shipped probe: its own suites, the enqueues, then those of the states it reads (members
  // of jobs added by hand, reused ids, records retried by hand, the job-tied lock)
  [PROBE_SCRIPT]: [
    'test/contract/C19-producer-contract/enqueue-probe.test.ts',
    'test/contract/C19-producer-contract/probe-states.test.ts',
    'test/contract/C27-costs/wait-index-leak.test.ts',
    'test/contract/C18-enqueue/enqueue.test.ts',
    'test/contract/C18-enqueue/enqueue-replicas.test.ts',
    'test/contract/C18-enqueue/enqueued-defer-then-threw.test.ts',
    'test/contract/C18-enqueue/stale-dedup.test.ts',
    'test/contract/C19-producer-contract/python-producer.test.ts',
    'test/contract/C17-promote-remove/marker-deleted.test.ts',
    'test/contract/C17-promote-remove/removed-wake-up-enqueue.test.ts',
    'test/contract/C27-costs/removed-failed-records.test.ts',
    'test/contract/C12-one-in-flight/job-lock.test.ts',
    // a completed job BullMQ keeps, its licence left behind: not pending
    'test/contract/C27-costs/kept-licence-holder.test.ts',
  ],
};
const only = arg('tests')?.split(',');
/** Suites left out of this run (--skip: e.g. one that fails without a mutant); the report's hash says so. */
const skip = new Set(arg('skip')?.split(',') ?? []);
const kept = (tests: string[]) => tests.filter((t) => !skip.has(t));
/** Every suite a mutant may run. */
const TESTS = only ?? kept([...new Set([DIRECT, ...CORE, ...Object.values(OWN).flat()])]);
/** The suites a mutant of `script` runs: its own first, then the core ones. */
const testsOf = (script: string): string[] =>
  only ??
  kept([
    ...new Set([
      ...(NOT_DIRECT.has(script) ? [] : [DIRECT]),
      ...(OWN[script.startsWith('INCLUDES/') ? 'HELPERS' : script] ?? []),
      ...CORE,
    ]),
  ]);
const REPORT = join(ROOT, 'reports/lua-mutation.json');

interface Mutant {
  id: string;
  /** The .lua file mutated. */
  file: string;
  script: string;
  line: number;
  op: 'delete' | 'flip';
  original: string;
  mutated: string;
}
interface Result extends Mutant {
  status: 'Killed' | 'Survived' | 'Timeout' | 'CompileError';
  /** The hash of the suites the result was measured with (a row of an earlier version has none). */
  testsHash?: string;
  killedBy?: string;
  ms: number;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const flag = (name: string) => process.argv.includes(`--${name}`);

/** The line with string literals and a trailing comment blanked, so operators are found in code only. */
function codeOnly(text: string): string {
  let out = '';
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote) {
      if (c === '\\') {
        out += '  ';
        i++;
        continue;
      }
      if (c === quote) quote = null;
      out += ' ';
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      out += ' ';
      continue;
    }
    if (c === '-' && text[i + 1] === '-') return out + ' '.repeat(text.length - i);
    out += c;
  }
  return out;
}

const FLIP: Record<string, string> = { '==': '~=', '~=': '==', '<=': '>', '>=': '<', '<': '>=', '>': '<=' };

/** The lines of a Lua file outside its block comments (`--[[` to `]]`), all of them script `script`. */
function fileLines(lines: string[], script: string): { line: number; script: string }[] {
  const out: { line: number; script: string }[] = [];
  let inComment = false;
  lines.forEach((text, i) => {
    if (inComment) {
      if (text.includes(']]')) inComment = false;
      return;
    }
    if (/^\s*--\[\[/.test(text)) {
      inComment = !text.includes(']]');
      return;
    }
    out.push({ line: i, script });
  });
  return out;
}

/** The mutants of the .lua file `file`, whose text is `source`. */
function mutantsOf(file: string, source: string): Mutant[] {
  const lines = source.split('\n');
  const mutants: Mutant[] = [];
  for (const { line, script } of fileLines(lines, scriptOf(file))) {
    const text = lines[line] as string;
    const code = codeOnly(text).trim();
    if (code === '') continue;
    const opensOrCloses =
      /^(end|else|elseif|until)\b|^[})]/.test(code) ||
      /(\bthen|\bdo|\belse|[{(,])$/.test(code) ||
      (/\bfunction\b/.test(code) && !/\bend\)?$/.test(code));
    const base = { file, script, line: line + 1, original: text };
    if (!opensOrCloses) {
      mutants.push({ ...base, id: `${script}:${line + 1}:delete`, op: 'delete', mutated: '' });
    }
    const masked = codeOnly(text);
    const re = /==|~=|<=|>=|<|>/g;
    let m: RegExpExecArray | null;
    let n = 0;
    while ((m = re.exec(masked))) {
      const to = FLIP[m[0]] as string;
      const mutated = text.slice(0, m.index) + to + text.slice(m.index + m[0].length);
      mutants.push({ ...base, id: `${script}:${line + 1}:flip${n++}`, op: 'flip', mutated });
    }
  }
  return mutants;
}

/** Whether Redis loads `script` (SCRIPT LOAD compiles it, runs nothing). */
function loads(port: number, script: string): boolean {
  const r = spawnSync('redis-cli', ['-p', String(port), '-x', 'SCRIPT', 'LOAD'], { input: script, encoding: 'utf8' });
  return r.status === 0 && /^[0-9a-f]{40}\s*$/.test(r.stdout);
}

function hashOf(paths: string[]): string {
  const h = createHash('sha256');
  for (const p of paths) h.update(readFileSync(join(ROOT, p)));
  return h.digest('hex').slice(0, 16);
}

function makeSandbox(): string {
  const dir = join(ROOT, '.stryker-tmp', `lua-sandbox-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // (python: the Python producer's suite runs it, and it reads the probe's file)
  for (const p of ['src', 'test', 'python', 'examples', 'jest.config.ts', 'tsconfig.json', 'package.json']) {
    cpSync(join(ROOT, p), join(dir, p), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  // the suites run in the order given (the script's own, then the core ones fastest first), so --bail
  // stops a killed mutant early
  writeFileSync(
    join(dir, 'sequencer.js'),
    `const Sequencer = require('@jest/test-sequencer').default;
const order = JSON.parse(process.env.MUTATE_LUA_ORDER || '[]');
const rank = (p) => order.findIndex((t) => p.endsWith(t));
module.exports = class extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => rank(a.path) - rank(b.path));
  }
};
`,
  );
  return dir;
}

function runJest(
  dir: string,
  timeoutMs: number,
  tests: string[],
): Promise<{ status: Result['status']; killedBy?: string; ms: number }> {
  const started = Date.now();
  const out = join(dir, 'jest-result.json');
  rmSync(out, { force: true });
  const workers = arg('workers') ?? '2';
  return new Promise((done) => {
    const child = spawn(
      join(ROOT, 'node_modules/.bin/jest'),
      [
        '--ci',
        '--bail',
        '--silent',
        `--maxWorkers=${workers}`,
        '--testSequencer=./sequencer.js',
        `--testTimeout=${arg('test-timeout') ?? 15_000}`,
        '--json',
        `--outputFile=${out}`,
        ...tests,
      ],
      {
        cwd: dir,
        stdio: ['ignore', 'ignore', 'pipe'],
        detached: true,
        env: { ...process.env, MUTATE_LUA_ORDER: JSON.stringify(tests) },
      },
    );
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      if (stderr.length < 1_000_000) stderr += b.toString();
    });
    const timer = setTimeout(() => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const ms = Date.now() - started;
      if (signal === 'SIGKILL') return done({ status: 'Timeout', ms });
      if (code === 0) return done({ status: 'Survived', ms });
      // jest prints `FAIL <file>` then `● <describe> › <test>` for each failure
      const file = /FAIL (\S+)/.exec(stderr)?.[1];
      const title = /● (.+)/.exec(stderr)?.[1];
      let killedBy = file ? `${file}: ${title ?? '?'}` : `jest exited ${code}`;
      try {
        const r = JSON.parse(readFileSync(out, 'utf8')) as {
          testResults: { name: string; message: string; assertionResults: { status: string; fullName: string }[] }[];
        };
        for (const f of r.testResults) {
          const failed = f.assertionResults.find((a) => a.status === 'failed');
          if (failed) {
            killedBy = `${f.name.slice(dir.length + 1)}: ${failed.fullName}`;
            break;
          }
          if (f.message) killedBy = `${f.name.slice(dir.length + 1)}: suite failed to run`;
        }
      } catch {
        /* no result file: keep the exit code */
      }
      done({ status: 'Killed', killedBy, ms });
    });
  });
}

async function main() {
  const sources = new Map(SOURCES.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));
  const generated = readFileSync(join(ROOT, GENERATED), 'utf8');
  if (generated !== generatedModule(join(ROOT, LUA)))
    throw new Error(`${GENERATED} is not the .lua files': run npm run lua`);
  const all = SOURCES.flatMap((f) => mutantsOf(f, sources.get(f) as string));
  let mutants = all;
  const ids = arg('id')?.split(',');
  if (ids) mutants = mutants.filter((m) => ids.includes(m.id));
  const scripts = arg('script')?.split(',');
  if (scripts) mutants = mutants.filter((m) => scripts.includes(m.script));
  const ops = arg('ops')?.split(',');
  if (ops) mutants = mutants.filter((m) => ops.includes(m.op));
  const limit = arg('limit');
  if (limit) mutants = mutants.slice(0, Number(limit));
  if (flag('list')) {
    for (const m of mutants) console.log(`${m.id}\t${m.original.trim()}\t=>\t${m.mutated.trim() || '(deleted)'}`);
    console.log(`${mutants.length} mutants`);
    return;
  }
  // the mutants run against a redis-server of the run's own, never a shared one: a mutant that makes
  // a script loop after it wrote leaves Redis BUSY until SHUTDOWN NOSAVE (SCRIPT KILL refuses), and
  // every later client would see BUSY. After each mutant the server must answer PING, or it is
  // killed and started again (empty: the suites make their own keys)
  const redis = await PrivateRedis.start();
  process.env.REDIS_URL = redis.url;
  const fresh = async () => {
    const ok = await waitForPong(redis.port, 2_000).then(
      () => true,
      () => false,
    );
    if (!ok) await redis.restart();
  };

  const testsHash = hashOf(TESTS);
  const previous: { testsHash?: string; results?: Result[] } = existsSync(REPORT)
    ? JSON.parse(readFileSync(REPORT, 'utf8'))
    : {};
  // an earlier result is matched by script, operator and line text: line numbers drift
  // (a line whose text recurs in its script, e.g. the permission probe's `try('DEL', K)`, is told
  // apart by its rank among those lines, in line order)
  const text = (m: Mutant) => `${m.script}\n${m.id.split(':')[2]}\n${m.original}\n${m.mutated}`;
  const ranked = (ms: Mutant[]) => {
    const out = new Map<string, number>();
    const seen = new Map<string, number>();
    for (const m of [...ms].sort((a, b) => a.line - b.line)) {
      const n = seen.get(text(m)) ?? 0;
      seen.set(text(m), n + 1);
      out.set(m.id, n);
    }
    return out;
  };
  const now = ranked(all);
  const before = ranked(previous.results ?? []);
  const key = (m: Mutant, r: Map<string, number>) => `${text(m)}\n${r.get(m.id) ?? 0}`;
  const reuse = new Map<string, Result>();
  if (flag('resume')) {
    for (const r of previous.results ?? []) {
      // a survivor is reused only if measured with the suites as they are now (its own hash: the
      // file's is that of the last run, which may have run other scripts)
      if (r.testsHash === testsHash || r.status !== 'Survived') reuse.set(key(r, before), r);
    }
  }
  const dir = makeSandbox();
  const started = Date.now();
  // the report keeps the rows of every mutant that still exists (by its current id)
  const current = new Map(all.map((m) => [key(m, now), m]));
  const results = new Map<string, Result>();
  for (const r of previous.results ?? []) {
    const m = current.get(key(r, before));
    if (m) results.set(m.id, { ...r, ...m });
  }
  const save = () =>
    only ||
    writeFileSync(
      REPORT,
      `${JSON.stringify({ sources: SOURCES, tests: TESTS, testsHash, results: [...results.values()] }, null, 2)}\n`,
    );
  /** The sandbox's files as they are without a mutant. */
  const restore = () => {
    for (const [f, text] of sources) writeFileSync(join(dir, f), text);
    writeFileSync(join(dir, GENERATED), generated);
  };
  /** The flattened scripts of the sandbox as they are now. */
  const flattened = () => scriptFiles(join(dir, LUA)).map((f) => flatten(f, join(dir, LUA)));
  try {
    // the baseline: every suite the selected mutants may run
    const baseTests = only ?? [...new Set(mutants.flatMap((m) => testsOf(m.script)))];
    const baseline = await runJest(dir, 900_000, baseTests);
    console.log(`baseline: ${baseline.status} in ${(baseline.ms / 1000).toFixed(0)} s (${baseTests.length} suites)`);
    if (baseline.status !== 'Survived') throw new Error(`the suites fail without a mutant: ${baseline.killedBy}`);
    // a mutant that makes a suite wait out its deadlines counts as detected (Timeout), as in Stryker
    const timeoutMs = Number(arg('timeout') ?? Math.max(60_000, 3 * baseline.ms));
    let i = 0;
    for (const m of mutants) {
      i++;
      const old = reuse.get(key(m, now));
      if (old) {
        results.set(m.id, { ...old, ...m });
        continue;
      }
      const lines = (sources.get(m.file) as string).split('\n');
      lines[m.line - 1] = m.mutated;
      const before = new Set(flattened());
      writeFileSync(join(dir, m.file), lines.join('\n'));
      let r: { status: Result['status']; killedBy?: string; ms: number };
      // every script the mutant changed (an include's: each script that includes it) must load
      if (!flattened().every((text) => before.has(text) || loads(redis.port, text))) {
        r = { status: 'CompileError', ms: 0 };
      } else {
        writeFileSync(join(dir, GENERATED), generatedModule(join(dir, LUA)));
        r = await runJest(dir, timeoutMs, testsOf(m.script));
      }
      restore();
      await fresh();
      results.set(m.id, { ...m, ...r, testsHash });
      save();
      console.log(
        `[${i}/${mutants.length}] ${r.status.padEnd(8)} ${m.id}  ${m.original.trim()}  =>  ${m.mutated.trim() || '(deleted)'}` +
          (r.killedBy ? `\n      by ${r.killedBy}` : ''),
      );
    }
  } finally {
    restore();
    rmSync(dir, { recursive: true, force: true });
    await redis.stop();
  }
  save();
  const run = mutants.map((m) => results.get(m.id) as Result);
  const byScript = new Map<string, Result[]>();
  for (const r of run) byScript.set(r.script, [...(byScript.get(r.script) ?? []), r]);
  // the score leaves out the compile errors (mutants Redis would not load), as Stryker's does
  console.log(`\nscript          mutants  killed  timeout  survived  compile  score`);
  for (const [script, rs] of [...byScript, ['all', run] as [string, Result[]]]) {
    const k = rs.filter((r) => r.status === 'Killed').length;
    const t = rs.filter((r) => r.status === 'Timeout').length;
    const s = rs.filter((r) => r.status === 'Survived').length;
    const c = rs.filter((r) => r.status === 'CompileError').length;
    console.log(
      `${script.padEnd(16)}${String(rs.length).padStart(7)}${String(k).padStart(8)}${String(t).padStart(9)}${String(s).padStart(10)}${String(c).padStart(9)}  ${((100 * (k + t)) / (k + t + s)).toFixed(1)} %`,
    );
  }
  for (const r of run.filter((x) => x.status === 'Survived')) {
    console.log(`survived ${r.id}: ${r.original.trim()} => ${r.mutated.trim() || '(deleted)'}`);
  }
  console.log(`run time ${((Date.now() - started) / 60000).toFixed(1)} min`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
