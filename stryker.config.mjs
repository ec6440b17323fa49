// @ts-check
import { URL, fileURLToPath } from 'node:url';

/**
 * Mutation testing. Run with `npm run test:mutation`; see docs/testing.md,
 * "Mutation testing". Not part of `npm test`: too slow for CI.
 *
 * The Lua in src/lua/*.lua is mutated by scripts/mutate-lua.ts instead
 * (`npm run test:mutation:lua`): to Stryker a script is one string literal.
 */

/**
 * The test files a mutant is tried against: the quick in-process suites that
 * reach the contract's files (a mutant runs only those of them that cover it,
 * `perTest`). The slow suites (crash, reliability, cluster, browser, package, CLI)
 * are left out: with them a surviving mutant re-runs minutes of tests.
 */
export const gateSuites = [
  // the pure files' own suites
  'contract/C5-outcomes/outcome-classes',
  'contract/C5-outcomes/answer-helpers',
  'contract/C20-stage-ids/stage-ref',
  'contract/C20-stage-ids/bounds',
  'contract/C20-stage-ids/job-ids',
  'contract/C23-observability/error-codes',
  'contract/C19-producer-contract/job-options',
  'contract/C19-producer-contract/job-data-schema',
  'contract/C20-stage-ids/vectors',
  // the core of the contract: dispatch, deferral, cancel/clear, wake-ups, the worker
  'contract/C1-deferral/dispatch',
  'contract/C2-no-side-effect/while-deferred',
  'contract/C28-views/deferred-stage-key',
  'contract/C12-one-in-flight/in-flight',
  'contract/C5-outcomes/results-not-exceptions',
  'contract/C23-observability/dispatch-events',
  'contract/C9-cancel/cancel-and-clear',
  'contract/C10-clear/clear',
  'contract/C3-wake-up-runs/worker',
  'contract/C11-retry-budget/budget-across-deferrals',
  'contract/C7-deferral-limits/limits',
  'contract/C9-cancel/cancel-after-terminal-failure',
  'contract/C19-producer-contract/malformed-job-data',
  'contract/C18-enqueue/enqueue',
  'contract/C16-retry-by-hand/operator-paths',
  'contract/C11-retry-budget/ticks-keep-budget',
  'contract/C7-deferral-limits/retry-after-limit',
  'contract/C24-close/close-loses-nothing',
  'contract/C13-fencing/fencing-tokens',
  'contract/C4-windows/redis-clock-windows',
  'contract/C9-cancel/cancel-reaches-executor',
  'contract/C22-bad-input/refused-up-front',
  'contract/C1-deferral/journal-throws',
  'contract/C23-observability/bound-and-hook-events',
  'contract/C3-wake-up-runs/defer-then-throw',
  'contract/C11-retry-budget/job-retry-options',
  'contract/C8-wake-deferred/wake-deferred',
  'contract/C4-windows/adaptive-and-hints',
  'contract/C12-one-in-flight/in-flight-retry',
  'contract/C12-one-in-flight/lock-renewal',
  'contract/C23-observability/events',
  'contract/C25-start-up/connection',
  'contract/C25-start-up/producer-only',
  // tests written for surviving mutants, and quick suites that reach lines the core ones do not
  'contract/C12-one-in-flight/dispatch-edges',
  'contract/C9-cancel/cancel-aborts-signal',
  'contract/C24-close/close-aborts-attempts',
  'contract/C13-fencing/lock-lost-then-threw',
  'contract/C11-retry-budget/failure-takes-stage',
  'contract/C5-outcomes/dispatch-answers',
  'contract/C24-close/close-during-executor',
  'contract/C13-fencing/lock-lost-answers',
  'contract/C1-deferral/deferral-answers',
  'contract/C6-sent-stays-sent/answer-return-value',
  'contract/C4-windows/redis-clock',
  'contract/C22-bad-input/payload-checks',
  'contract/C22-bad-input/executor-results',
  'contract/C19-producer-contract/retrying-job-holds-stage',
  'contract/C6-sent-stays-sent/revoked-licence',
  'contract/C18-enqueue/enqueued-defer-then-threw',
  'contract/C9-cancel/cancel-from-another-host',
  'contract/C8-wake-deferred/wait-index-chain-end',
  'contract/C9-cancel/cancel-hand-added',
  'contract/C16-retry-by-hand/producer-job-fails-for-good',
  'contract/C11-retry-budget/licence-keeps-chain',
  'contract/C11-retry-budget/hold-chain',
  'contract/C4-windows/worker-clock-ahead',
  // processor.ts: the engine's own backoff, the executor's UnrecoverableError, a kept job retried,
  // maxStartedAttempts (quick suites: seconds each)
  'contract/C11-retry-budget/processor-backoff',
  'contract/C2-no-side-effect/job-never-forced',
  'contract/C12-one-in-flight/lock-outlives-bullmq-finish',
  'contract/C13-fencing/lapsed-bullmq-lock',
  'contract/C17-promote-remove/hash-deleted-while-running',
  'contract/C24-close/closed-engine-refuses-jobs',
  'contract/C27-costs/finished-mark-cost',
  'contract/C25-start-up/engine-edges',
  'contract/C24-close/close-own-connections',
  'contract/C14-crash-recovery/stalled-failed-for-good',
  'contract/C19-producer-contract/stalled-malformed-leaves-nothing',
  'contract/C22-bad-input/malformed-filters',
  'contract/C23-observability/cancel-enqueue-report',
  'contract/C18-enqueue/enqueue-replicas',
  'contract/C16-retry-by-hand/retry-completed',
  'contract/C12-one-in-flight/started-attempts',
  'contract/C11-retry-budget/unrecoverable-by-name',
  'contract/C25-start-up/key-prefix',
  // adapter.ts: addDeduplicated's hand-off of a stale deduplication key
  'contract/C18-enqueue/stale-dedup',
  // producer.ts and store/probe.ts: enqueue's `replace`, a held job removed, the replica wait's failures
  'contract/C18-enqueue/replace-payload',
  'contract/C18-enqueue/replace-guards',
  'contract/C18-enqueue/held-job-removed',
  'contract/C21-replicas/group-commit-rejection',
  'contract/C21-replicas/worker-replication-unconfirmed',
  'contract/C27-costs/enqueue-cost',
  // the other quick in-process suites of the contract (71 tests, about 10 s together)
  'contract/C25-start-up/bullmq-versions',
  'contract/C12-one-in-flight/job-lock',
  'contract/C28-views/list-deferred-paging',
  'contract/C17-promote-remove/marker-deleted',
  'contract/C22-bad-input/options',
  'contract/C19-producer-contract/worker-holds-producers',
  'contract/C4-windows/windows',
  'contract/C15-bull-board/wake-up-readable',
  'contract/C19-producer-contract/enqueue-probe',
  'contract/C23-observability/metrics',
  // src/store/batch.ts and a sent stage's release
  'contract/C27-costs/batch-one-call',
  'contract/C25-start-up/shared-client-scripts',
  'contract/C6-sent-stays-sent/release-reply-lost',
  // retries by hand: a failed job retried while its stage's chain ends or a success runs (34 tests, about 9 s)
  'contract/C16-retry-by-hand/retry-while-success-runs',
  'contract/C16-retry-by-hand/superseded-retry',
  'contract/C16-retry-by-hand/unattached-retry-after-chain-end',
  'contract/C16-retry-by-hand/unattached-worker-reset-retry',
  'contract/C16-retry-by-hand/retry-after-stall',
  'contract/C16-retry-by-hand/retry-completed-wake-up',
  'contract/C16-retry-by-hand/success-beside-failed-record',
  'contract/C16-retry-by-hand/retry-all-reset-unattached',
  'contract/C16-retry-by-hand/retry-all-failed',
  // a wake-up an operator promoted reports its wake (woken), once
  'contract/C8-wake-deferred/woken-once',
  'contract/C8-wake-deferred/woken-per-retry',
  // an early wake-up re-delayed while a wake or a clear ends its deferral (store/wake.ts's promoteUnlessDeferred)
  'contract/C8-wake-deferred/wake-during-early-redelay',
  'contract/C10-clear/clear-wake-up-race',
  // resource gates: a closed gate, its line, the probe and the wake (51 tests, about 11 s together)
  'contract/C31-resource-gates/gated-dispatch',
  'contract/C31-resource-gates/probe-races',
  'contract/C31-resource-gates/cancel-clear-bounds',
  'contract/C31-resource-gates/line-order',
  'contract/C31-resource-gates/gate-edges',
  'contract/C31-resource-gates/named-by-answer',
  'contract/C31-resource-gates/bad-input',
  'contract/C31-resource-gates/line-past-ended-chains',
  'contract/C31-resource-gates/list-gates',
  // store/listing.ts and store/reader.ts: listDeferred's rows and page bounds, a removed wake-up, the CLI's queue check
  'contract/C28-views/list-deferred-rows',
  'contract/C28-views/list-paging',
  'contract/C28-views/removed-wake-up-views',
  'cli/dispatch-queue-guard',
  // store/wake.ts: a clear's batches of 500 (a later batch's failure counts the earlier ones)
  'contract/C10-clear/clear-batch-fails',
  // store/wake.ts: gateOpened only from the wake that opened a closed gate
  'contract/C31-resource-gates/gate-opened-once',
  // store/replica-wait.ts and store/transaction.ts: group commit, the skip window, the connection check, a refused
  // WAIT (a private replica redis-server), a write refused inside its MULTI sends no WAIT, its CLIENT INFO refused at
  // EXEC (a private redis-server behind a proxy) (about 3 s together)
  'contract/C21-replicas/replica-wait-confirm',
  'contract/C21-replicas/failed-write-waits-for-nothing',
  'contract/C21-replicas/connection-read-refused',
  // dispatch.ts survivors: a success that saw capacityLeft: 0, the gate at the bound, a gated answer, the deferred
  // event's resource, the idempotent bound's release, BullMQ's rate limit, a thrown CapacityError of any reason
  'contract/C31-resource-gates/success-closes-gate',
  'contract/C31-resource-gates/line-fresh-chain',
  'contract/C23-observability/deferred-event-resource',
  'contract/C7-deferral-limits/idempotent-bound-direct',
  'contract/C5-outcomes/rate-limit',
  'contract/C5-outcomes/reasons-in-your-words',
  // close(): an executor slower than the 2 s Redis wait (3 s), a begin landing after close() gave up on it and a
  // release Redis never answers (private redis-servers, about 6 s each)
  'contract/C24-close/close-waits-slow-executor',
  'contract/C24-close/close-begin-lands-late',
  'contract/C24-close/close-hangs-on-release',
  // engine.ts: wakeDeferred's filter checks, attachWorker's queue check, a call close() cut off
  'contract/C8-wake-deferred/wake-filter',
  'contract/C14-crash-recovery/own-worker-stalled',
  'contract/C24-close/close-unreachable',
  'contract/C24-close/close-own-connection-quit',
  // deferral-store.ts: a hinted chain's flag (enqueue's replace overtaken or given data that is not JSON: replace-guards)
  'contract/C8-wake-deferred/wake-skips-hinted',
  // store/cancel.ts, job-marks.ts, keys.ts: a cancel beside failed-job records, the own Worker's removeOnFail,
  // the replica wait's route key under an ACL, the CLI's queue check in process
  'contract/C9-cancel/cancel-failed-record-states',
  'contract/C27-costs/own-worker-remove-on-fail',
  'contract/C25-start-up/acl',
  'cli/session-queue-exists',
];

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  packageManager: 'npm',
  mutate: [
    'src/dispatch.ts',
    // what an attempt reads at its boundary: the executor's answer, the payload, the window
    'src/answer.ts',
    'src/payload.ts',
    'src/windows.ts',
    'src/bullmq/**/*.ts',
    'src/job-data.ts',
    'src/stage-ref.ts',
    'src/outcomes.ts',
    'src/engine.ts',
    // a stage's resource: its name's checks and encoding, a capacity answer's free slots
    'src/resource.ts',
    // the Redis store behind the contract (the hot path's begin and batch, cancel, clear, wake, the probe's reply)
    'src/deferral-store.ts',
    'src/store/**/*.ts',
    // start-up and its connections: stryker.startup.config.mjs (here each survivor re-runs every suite)
    '!src/store/client.ts',
    '!src/store/connections.ts',
  ],
  testRunner: 'jest',
  jest: {
    configFile: 'jest.config.ts',
    // A mutant that leaves a promise pending fails its test at 10 s, not after Stryker's timeout (the gate
    // suites' tests take under 4 s here; the few longer ones set their own). A mutant runs only the files of
    // its covering tests (the sequencer), and once a test has failed its later tests are skipped (the
    // environment): Stryker's jest runner loads every file and cannot bail by itself.
    config: {
      testMatch: gateSuites.map((suite) => `**/test/${suite}.test.ts`),
      testTimeout: 10_000,
      testEnvironment: fileURLToPath(new URL('./scripts/stryker-environment.cjs', import.meta.url)),
      testSequencer: fileURLToPath(new URL('./scripts/stryker-sequencer.cjs', import.meta.url)),
    },
    enableFindRelatedTests: false,
  },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  // Module-level constants (the zod schema, the outcome lists) would each need a full reload of every suite.
  ignoreStatic: true,
  // the machine is shared: two test processes; run under `nice` (the npm script does)
  concurrency: 2,
  // a mutant's run is stopped after 1.5 x its tests' time in the dry run + 10 s, and counted as detected
  timeoutMS: 10_000,
  timeoutFactor: 1.5,
  // the dry run (every gate suite, ~2 min alone) took over Stryker's default 5 min beside another run
  dryRunTimeoutMinutes: 20,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  thresholds: { high: 90, low: 85, break: 85 },
};

export default config;
