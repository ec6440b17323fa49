// @ts-check
/**
 * The quick part of the mutation gate: the pure files (outcomes, stage ids,
 * job ids and data, the executor's answer, the payload, the window) against their own suites only. Over an hour from nothing (149 of 567
 * mutants in 20 min: a mutant that refuses every job holds a Worker suite until its timeout),
 * seconds incrementally. `npm run test:mutation:pure`; see docs/testing.md.
 */
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  ...base,
  mutate: [
    'src/outcomes.ts',
    'src/stage-ref.ts',
    'src/job-data.ts',
    'src/answer.ts',
    'src/payload.ts',
    'src/windows.ts',
  ],
  jest: {
    ...base.jest,
    config: {
      testMatch: [
        '**/test/contract/C5-outcomes/(outcome-classes|reasons-in-your-words|not-sent-counts|answer-helpers).test.ts',
        '**/test/contract/C20-stage-ids/(stage-ref|bounds|job-ids|vectors|internal-licence-encoding).test.ts',
        '**/test/contract/C19-producer-contract/(job-options|job-data-schema).test.ts',
        '**/test/contract/C23-observability/error-codes.test.ts',
        '**/test/contract/C31-resource-gates/(bad-input|named-by-answer).test.ts',
        // answer.ts, payload.ts, windows.ts (some on Redis: REDIS_URL)
        '**/test/contract/C22-bad-input/(payload-checks|payload-refusal-names|payload-shapes|payload-edges|hidden-payload-fields|proxy-payload|array-payload-prototype|lone-surrogate-payload|build-id-surrogate|executor-results).test.ts',
        '**/test/contract/C6-sent-stays-sent/(answer-return-value|flat-answer|answer-guard-escapes|answer-copy|answer-copy-frozen-intrinsics|describe-throws|sent-answer-getters).test.ts',
        '**/test/contract/C4-windows/(adaptive-and-hints|retry-after-infinity).test.ts',
      ],
    },
  },
  // these suites type-check nothing the runner would not catch: a mutant that does not compile fails them
  checkers: [],
  incrementalFile: 'reports/stryker-incremental.pure.json',
  htmlReporter: { fileName: 'reports/mutation-pure/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation-pure/mutation.json' },
};

export default config;
