// @ts-check
/**
 * The Cluster-only code: src/store/redirects.ts (a pipeline or MULTI sent again after MOVED, ASK,
 * TRYAGAIN) and src/store/replica-wait.ts (the WAIT group commit, its PERSIST answering ASK during a
 * migration), which the quick suites of stryker.config.mjs run on one Redis only. Against the two
 * test/cluster suites that reach them: each starts its own 3 + 3 cluster (no Redis needed beforehand).
 * `npm run test:mutation:cluster`; see docs/testing.md, "Mutation testing".
 */
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  ...base,
  mutate: ['src/store/redirects.ts', 'src/store/replica-wait.ts'],
  jest: {
    ...base.jest,
    config: {
      ...base.jest?.config,
      // ops-faults: a slot migrated, MIGRATING, reverted, a failover; replication: WAIT's shortfall, skip, connection
      testMatch: ['**/test/cluster/(cluster.ops-faults|replication).test.ts'],
    },
  },
  incrementalFile: 'reports/stryker-incremental.cluster.json',
  htmlReporter: { fileName: 'reports/mutation-cluster/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation-cluster/mutation.json' },
};

export default config;
