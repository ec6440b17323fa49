// @ts-check
/**
 * The start-up code: src/store/client.ts (the scripts defined as commands, the permission check,
 * QUIT or drop) and src/store/connections.ts (the client opened once, the renewal connection).
 * Every test opens a client, so in stryker.config.mjs each of their mutants that survives re-runs
 * every quick suite; here they run against the suites that pin start-up and close (C25, C24, C21)
 * and the core's dispatch, cancel, clear and wake suites, which call every script, with the scripts
 * flushed (loaded again) and the start-up clock reading (clock-skew).
 * `npm run test:mutation:startup`; see docs/testing.md, "Mutation testing".
 */
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  ...base,
  mutate: ['src/store/client.ts', 'src/store/connections.ts'],
  jest: {
    ...base.jest,
    config: {
      ...base.jest?.config,
      testMatch: [
        '**/test/contract/(C25-start-up|C24-close|C21-replicas)/*.test.ts',
        '**/test/contract/C1-deferral/(dispatch|scripts-flushed).test.ts',
        '**/test/contract/C4-windows/clock-skew.test.ts',
        '**/test/contract/C9-cancel/cancel-and-clear.test.ts',
        '**/test/contract/C8-wake-deferred/wake-deferred.test.ts',
        '**/test/contract/C18-enqueue/(enqueue|replace-payload).test.ts',
        '**/test/contract/C3-wake-up-runs/worker.test.ts',
        '**/test/contract/C31-resource-gates/gated-dispatch.test.ts',
      ],
    },
  },
  incrementalFile: 'reports/stryker-incremental.startup.json',
  htmlReporter: { fileName: 'reports/mutation-startup/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation-startup/mutation.json' },
};

export default config;
