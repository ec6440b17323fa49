// @ts-check
/**
 * Mutation testing (issue 14, item 2). Run with `npm run test:mutation`; see
 * docs/testing.md, "Mutation testing". Not part of `npm test`: too slow for CI.
 *
 * The Lua in src/lua/scripts.ts is mutated by scripts/mutate-lua.ts instead
 * (`npm run test:mutation:lua`): to Stryker a script is one string literal.
 */

/** The test files a mutant is tried against: the contract suites that run in-process. */
const excludedTests = [
  '/test/(cluster|browser|package|cli)/', // other processes, built dist/, a Redis Cluster: they cannot see a mutant
  '/test/reliability/(concurrency|operations|crash|redis-faults|model)\\.test\\.ts$', // child processes or 12-240 s each
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
    config: { testPathIgnorePatterns: ['/node_modules/', ...excludedTests] },
    enableFindRelatedTests: true,
  },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  // Module-level constants (the zod schema, the outcome lists) would each need a full reload of every suite.
  ignoreStatic: true,
  concurrency: 2,
  timeoutMS: 15_000,
  timeoutFactor: 2,
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
