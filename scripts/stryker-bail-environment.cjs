/* global require, process, module */
// @ts-check
/**
 * Jest's node environment, with bail for Stryker's mutant runs: once a test or a hook has
 * failed under a mutant, the mutant is killed, so every later test of that run (this file's
 * and the next files') is skipped. Stryker's jest runner cannot bail itself (it runs jest
 * in band with `bail: false`), so a mutant that makes tests hang would otherwise wait out
 * each covering test's timeout in turn, and then Stryker's own.
 *
 * The environment class is loaded once per process (runInBand), so the module's state spans
 * a mutant's files. Outside a mutant run (the dry run, `npm test`) it changes nothing: Stryker
 * names the active mutant in `__STRYKER_ACTIVE_MUTANT__` only while one runs.
 */
const { TestEnvironment } = require('jest-environment-node');

/** The mutant under which a test failed, if one did. */
let failedUnder;

class BailEnvironment extends TestEnvironment {
  /** @param {import('jest-circus').Circus.Event} event */
  async handleTestEvent(event) {
    const mutant = process.env.__STRYKER_ACTIVE_MUTANT__;
    if (mutant === undefined) return;
    if (event.name === 'hook_failure' || (event.name === 'test_done' && event.test.errors.length > 0)) {
      failedUnder = mutant;
    } else if (failedUnder === mutant) {
      if (event.name === 'run_describe_start') event.describeBlock.mode = 'skip';
      else if (event.name === 'test_start') event.test.mode = 'skip';
    }
  }
}

module.exports = BailEnvironment;
