// The gate's config with every gate suite run against every mutant (no per-test coverage).
// Stryker's perTest coverage credits a line to the test running when it executed; code run
// by a BullMQ Worker's own async loop (the processor, the engine's worker hooks) is often
// credited to no test, so its mutants ran against too few tests and were reported as
// survivors that the suites do kill (docs/testing.md, "Coverage analysis"). Slower: use it
// for src/bullmq/ and src/engine.ts.
import base from './stryker.config.mjs';

export default {
  ...base,
  coverageAnalysis: 'all',
  // required with 'all' (Stryker refuses ignoreStatic without per-test coverage)
  ignoreStatic: false,
};
