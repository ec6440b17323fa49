// @ts-check
/**
 * Mutation testing (issue 14, item 2). Run with `npm run test:mutation`; see
 * docs/testing.md, "Mutation testing". Not part of `npm test`: too slow for CI.
 *
 * The Lua in src/lua/scripts.ts is mutated by scripts/mutate-lua.ts instead
 * (`npm run test:mutation:lua`): to Stryker a script is one string literal.
 */

/**
 * The test files a mutant is tried against: the quick in-process suites that
 * reach the contract's files (a mutant runs only those of them that cover it,
 * `perTest`). The slow suites (review folders, reliability, crash, cluster)
 * are left out: with them a surviving mutant re-runs minutes of tests.
 */
export const gateSuites = [
  // the pure files' own suites
  'outcomes',
  'stage-ref',
  'stage-ref.bounds',
  'job-ids.licences',
  'errors.codes',
  'job-options.check',
  'job-data.schema',
  'stage-ref.vectors',
  // the core of the contract: dispatch, deferral, cancel/clear, wake-ups, the worker
  'deferral.dispatch',
  'deferral.cancel-clear',
  'deferral.worker',
  'enqueue',
  'contract.operator-paths',
  'wake-deferred',
  'in-flight-retry',
  'lock-renewal',
  'events',
  'connection',
  'producer-only',
  // tests written for surviving mutants, and two quick review suites that reach lines the core ones do not
  'dispatch.survivors',
  'answer.survivors',
  'clock',
  'dispatch.checks',
  'dispatch.results',
  'lua.survivors',
  'review2/hold-chain',
  'review/clock-skew',
  // processor.ts: the engine's own backoff, the executor's UnrecoverableError, a kept job retried,
  // maxStartedAttempts (quick suites: seconds each)
  'processor.survivors',
  'engine.survivors',
  'producer.survivors',
  'review/retry-completed',
  'review/started-attempts',
  'review4/unrecoverable-by-name',
  'review4/connection',
  // adapter.ts: addDeduplicated's hand-off of a stale deduplication key
  'review4/stale-dedup',
  // the other quick in-process suites of the contract (71 tests, about 10 s together)
  'bullmq-adapter',
  'job-tied-lock',
  'list-deferred.paging',
  'marker-deleted',
  'options',
  'producers.contract',
  'windows',
  'wake-up-job.readable',
  'enqueue-probe',
  'metrics',
  // src/store/batch.ts and a sent stage's release (thirteenth session)
  'batch',
  'release-reply-lost',
];

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  packageManager: 'npm',
  mutate: [
    'src/dispatch.ts',
    'src/bullmq/**/*.ts',
    'src/job-data.ts',
    'src/stage-ref.ts',
    'src/outcomes.ts',
    'src/engine.ts',
  ],
  testRunner: 'jest',
  jest: {
    configFile: 'jest.config.ts',
    config: { testMatch: gateSuites.map((suite) => `**/test/${suite}.test.ts`) },
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
