import { BATCH } from '../../../src/lua/generated';
import { cut, CUTS } from '../../../bench/batch-cost';
import { stubBegin } from '../../../bench/scenarios/happy-path';

/**
 * The bench measures the rest of this clause (requests per job, Redis time per job): its
 * scripts must still fit the code they measure, or they measure nothing (a cut that no longer
 * applies throws; a begin stub whose record no longer reads as a plain lock loops every job).
 */
describe('C27: the bench measures the code as it is', () => {
  it.each(Object.entries(CUTS))("batch-cost's cut of %s still applies to BATCH", (_name, [from, to]) => {
    // (cut throws when BATCH no longer holds the text)
    expect(cut(from, to)).not.toBe(BATCH);
  });

  it("happy-path's begin stub still reads as a plain lock (it refuses to stand in otherwise)", () => {
    expect(() => stubBegin()()).not.toThrow();
  });
});
