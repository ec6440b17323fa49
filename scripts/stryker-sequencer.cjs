/* global require, process, module */
// @ts-check
/**
 * Jest's test sequencer for Stryker's mutant runs (stryker.config.mjs): only the files that hold
 * the mutant's covering tests run, the quickest first. Stryker's jest runner names those tests in `testNamePattern`
 * alone, and jest then loads every test file to find them: seconds a mutant. Which file holds
 * which test, `stryker-environment.cjs` wrote in the dry run. Outside a mutant run, or when a
 * file is not known, every file runs, as jest's own sequencer orders them.
 */
const { existsSync, readFileSync } = require('node:fs');
const Sequencer = require('@jest/test-sequencer').default;
const { TEST_FILES } = require('./stryker-environment.cjs');

class StrykerSequencer extends Sequencer {
  constructor(options) {
    super(options);
    this.pattern = options.globalConfig.testNamePattern;
  }

  async sort(tests) {
    const sorted = await super.sort(tests);
    if (process.env.__STRYKER_ACTIVE_MUTANT__ === undefined || !this.pattern || !existsSync(TEST_FILES)) return sorted;
    const covering = new RegExp(this.pattern, 'i');
    const needed = new Set();
    for (const line of readFileSync(TEST_FILES, 'utf8').split('\n')) {
      if (line === '') continue;
      const { path, names } = JSON.parse(line);
      if (names.some((name) => covering.test(name))) needed.add(path);
    }
    // quick files first (jest's own order puts the slow first): the sooner a test fails, the sooner the
    // mutant's run ends; a file that failed in an earlier run still goes first
    const kept = sorted
      .filter((test) => needed.has(test.path))
      .sort((a, b) => Number(this.hasFailed(b)) - Number(this.hasFailed(a)) || (a.duration ?? 0) - (b.duration ?? 0));
    return kept.length > 0 ? kept : sorted;
  }
}

module.exports = StrykerSequencer;
