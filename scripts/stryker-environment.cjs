/* global require, process, module */
// @ts-check
/**
 * Jest's node environment for Stryker's runs (stryker.config.mjs), in two parts:
 *
 * - Bail, in a mutant's run: once a test or a hook has failed under a mutant, the mutant is
 *   killed, so every later test of that run (this file's and the next files') is skipped.
 *   Stryker's jest runner cannot bail itself (it runs jest in band with `bail: false`), so a
 *   mutant that makes tests hang would otherwise wait out each covering test's timeout in turn.
 * - In the dry run (no mutant active), it writes which file holds each test to `TEST_FILES`
 *   in the sandbox, for `stryker-sequencer.cjs` to run only the files of a mutant's tests.
 *
 * The environment class is loaded once per process (runInBand), so the module's state spans
 * a mutant's files. Stryker names the active mutant in `__STRYKER_ACTIVE_MUTANT__` only while
 * one runs.
 */
const { appendFileSync } = require('node:fs');
const { join } = require('node:path');
const { TestEnvironment } = require('jest-environment-node');

/** Lines `{ path, names }`: the test file and its tests' full names, as Stryker names them. */
const TEST_FILES = join(process.cwd(), '.stryker-test-files.jsonl');

/** The mutant under which a test failed, if one did. */
let failedUnder;

/** A test's full name: its describe blocks' names and its own, joined by spaces. */
function fullName(test) {
  const names = [test.name];
  for (let block = test.parent; block?.parent; block = block.parent) names.unshift(block.name);
  return names.join(' ');
}

class StrykerEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
    /** @type {string[]} */
    this.names = [];
  }

  /** @param {import('jest-circus').Circus.Event} event */
  async handleTestEvent(event) {
    const mutant = process.env.__STRYKER_ACTIVE_MUTANT__;
    if (mutant === undefined) {
      if (event.name === 'test_start') this.names.push(fullName(event.test));
      return;
    }
    if (event.name === 'hook_failure' || (event.name === 'test_done' && event.test.errors.length > 0)) {
      failedUnder = mutant;
    } else if (failedUnder === mutant) {
      if (event.name === 'run_describe_start') event.describeBlock.mode = 'skip';
      else if (event.name === 'test_start') event.test.mode = 'skip';
    }
  }

  async teardown() {
    if (this.names.length > 0)
      appendFileSync(TEST_FILES, JSON.stringify({ path: this.testPath, names: this.names }) + '\n');
    await super.teardown();
  }
}

StrykerEnvironment.TEST_FILES = TEST_FILES;
module.exports = StrykerEnvironment;
