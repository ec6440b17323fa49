/**
 * INTERNAL ENCODING, not part of the contract (docs/contract.md, "Conflicts and implementation
 * details"): how the engine reads back the licence members it writes (class, chain, window end,
 * marks), which job a member stands for, and how a job id becomes a member. Pure functions, no
 * Redis; they kill mutants of src/job-data.ts no engine-level test sees, and go with the core
 * rebuild's other layout. The ids themselves, and that distinct stages get distinct ones, are
 * pinned on public outputs in job-ids.test.ts.
 */
import { FRESH_CHAIN, jobIdOfLicence, parseLicence, readyJobId, wakeUpJobId } from '../../../src/job-data';

const sid = 'book-1/ch-2/image';
const chain = { capacity: 3, idempotent: 1, failures: 2 };
const until = Date.UTC(2030, 0, 2, 3, 4, 5, 678);

describe('C20: internal: licence members read back', () => {
  it('parseLicence reads back class, chain and window end of an unmarked licence', () => {
    expect(parseLicence(wakeUpJobId(sid, 'capacity', chain, until))).toEqual({
      cls: 'capacity',
      chain,
      until,
      fresh: false,
      failed: false,
    });
    expect(parseLicence(wakeUpJobId(sid, 'idempotent', chain, until))).toMatchObject({ cls: 'idempotent', chain });
  });

  it('a licence marked `!` (cleared) starts a fresh chain; one marked `?` (failed for good) is also failed', () => {
    const lic = wakeUpJobId(sid, 'capacity', chain, until);
    expect(parseLicence(`${lic}!`)).toEqual({ cls: 'capacity', chain: FRESH_CHAIN, until, fresh: true, failed: false });
    expect(parseLicence(`${lic}?`)).toEqual({ cls: 'capacity', chain: FRESH_CHAIN, until, fresh: true, failed: true });
  });

  it('a ready job, or anything else, is not a licence parseLicence can read', () => {
    expect(parseLicence(readyJobId(sid))).toBeNull();
    expect(parseLicence(`${sid}@j.my-job`)).toBeNull();
    expect(parseLicence(`${sid}@cap.1.0.0`)).toBeNull();
    expect(parseLicence(`${sid}@cap.1.0.0.Zz`)).toBeNull(); // base 36 is lower case
    expect(parseLicence(`${wakeUpJobId(sid, 'capacity', chain, until)}-`)).toBeNull(); // anchored at the end
    expect(parseLicence(`${wakeUpJobId(sid, 'capacity', chain, until)}!!`)).toBeNull(); // one mark at most
  });

  it('jobIdOfLicence drops a mark', () => {
    const lic = wakeUpJobId(sid, 'capacity', chain, until);
    expect(jobIdOfLicence(lic)).toBe(lic);
    expect(jobIdOfLicence(`${lic}!`)).toBe(lic);
    expect(jobIdOfLicence(`${lic}?`)).toBe(lic);
    const ready = readyJobId(sid);
    expect(jobIdOfLicence(ready)).toBe(ready);
    expect(jobIdOfLicence(`${ready}?`)).toBe(ready);
  });

  it('the window end reads back exactly from any wake-up id (its nonce is always 4 characters)', () => {
    for (let i = 0; i < 500; i++) {
      const id = wakeUpJobId(sid, 'capacity', chain, until);
      expect({ id, until: parseLicence(id)?.until }).toEqual({ id, until });
    }
  });
});
