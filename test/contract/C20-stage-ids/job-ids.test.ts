/**
 * The job ids the engine writes, in the format docs/design.md ("wake-up") and docs/producers.md
 * document, and the data a dispatch job carries (the published job data shape); and, through a
 * running engine, that distinct stages whose ids extend one another get distinct keys and job ids.
 * How the engine reads its own licences back is pinned in internal-licence-encoding.test.ts.
 */
import { InvalidJobDataError } from '../../../src/errors';
import {
  dispatchJobData,
  FRESH_CHAIN,
  isWakeUpId,
  parseJobData,
  readyJobId,
  refOf,
  wakeUpJobId,
} from '../../../src/job-data';
import { stageId, type StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { thrown } from '../../helpers/thrown';

const sid = 'book-1/ch-2/image';

function thrownMessage(f: () => unknown): string {
  const e = thrown(f, InvalidJobDataError);
  if (!e) throw new Error('expected a throw');
  return e.message;
}
const chain = { capacity: 3, idempotent: 1, failures: 2 };
const until = Date.UTC(2030, 0, 2, 3, 4, 5, 678);

describe('C20: wake-up ids and ready job ids', () => {
  it('a wake-up id names the stage, the class tag and the chain, then the window end in base 36 and a 4-character nonce', () => {
    const cap = wakeUpJobId(sid, 'capacity', chain, until);
    expect(cap.startsWith(`${sid}@cap.3.1.2.${until.toString(36)}`)).toBe(true);
    expect(cap).toMatch(new RegExp(`^${sid}@cap\\.3\\.1\\.2\\.${until.toString(36)}[0-9a-z]{4}$`));
    const idem = wakeUpJobId(sid, 'idempotent', FRESH_CHAIN, until);
    expect(idem).toMatch(new RegExp(`^${sid}@idem\\.0\\.0\\.0\\.${until.toString(36)}[0-9a-z]{4}$`));
    expect(cap).not.toContain(':');
  });

  it('two deferrals of one stage in the same millisecond get distinct ids (the nonce)', () => {
    const ids = new Set(Array.from({ length: 50 }, () => wakeUpJobId(sid, 'capacity', chain, until)));
    expect(ids.size).toBeGreaterThan(45); // 36^4 nonces: a collision in 50 draws is rare, not 5 of them
  });

  it('the nonce is always 4 characters, so the window end is always the same characters of any wake-up id', () => {
    // a nonce below 36^3 (1 in 36) is zero-padded: 500 ids meet one almost surely (1 - (35/36)^500 > 1 - 1e-6)
    const head = `${sid}@cap.3.1.2.${until.toString(36)}`;
    for (let i = 0; i < 500; i++) {
      const id = wakeUpJobId(sid, 'capacity', chain, until);
      expect({ id, head: id.slice(0, head.length), tail: id.slice(head.length) }).toEqual({
        id,
        head,
        tail: expect.stringMatching(/^[0-9a-z]{4}$/),
      });
    }
  });

  it('a ready job id is `<stageId>@r.<time base 36><nonce>`', () => {
    const before = Date.now();
    const id = readyJobId(sid);
    const m = /^(.*)@r\.([0-9a-z]+)$/.exec(id);
    expect(m?.[1]).toBe(sid);
    const t = parseInt(m![2]!.slice(0, -4), 36);
    expect(t).toBeGreaterThanOrEqual(before);
    expect(t).toBeLessThanOrEqual(Date.now());
  });

  it('isWakeUpId holds for the engine’s wake-ups of that stage only', () => {
    const lic = wakeUpJobId(sid, 'capacity', chain, until);
    expect(isWakeUpId(sid, lic)).toBe(true);
    expect(isWakeUpId('other/stage', lic)).toBe(false);
    expect(isWakeUpId(sid, readyJobId(sid))).toBe(false);
    expect(isWakeUpId(sid, `x${lic}`)).toBe(false);
    // a wake-up of a stage whose id extends this one's (its `@` one character later), and a stage id longer than the job id
    expect(isWakeUpId(sid, `${sid}x${lic.slice(sid.length)}`)).toBe(false);
    expect(isWakeUpId(sid.slice(0, -1), lic)).toBe(false);
    expect(isWakeUpId(`${lic}/more`, lic)).toBe(false);
  });
});

describe('C20: dispatch job data', () => {
  const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };

  it('a ready job carries v, a copy of the scope, stage and payload, and no buildId key when there is none', () => {
    const data = dispatchJobData(ref, { p: 1 }, undefined);
    expect(data).toStrictEqual({ v: 1, scope: ['book-1', 'ch-2'], stage: 'image', payload: { p: 1 } });
    expect(Object.keys(data)).not.toContain('buildId');
    expect(data.scope).not.toBe(ref.scope);
    expect(dispatchJobData(ref, null, 'b-1')).toStrictEqual({ ...data, payload: null, buildId: 'b-1' });
  });

  it('a wake-up also carries why it is deferred (reason, class, count), nothing its id and delay already say', () => {
    const deferral = { reason: 'no_worker_available', class: 'capacity' as const, deferrals: 2 };
    expect(dispatchJobData(ref, 1, 'b', deferral)).toStrictEqual({
      v: 1,
      scope: ref.scope,
      stage: 'image',
      payload: 1,
      buildId: 'b',
      ...deferral,
    });
    expect(refOf(dispatchJobData(ref, 1, 'b', deferral))).toEqual(ref);
  });

  it('parseJobData accepts what dispatchJobData writes and refuses anything else with INVALID_JOB_DATA naming the job', () => {
    const ok = dispatchJobData(ref, { p: 1 }, 'b', { reason: 'r', class: 'idempotent', deferrals: 1 });
    expect(parseJobData(JSON.parse(JSON.stringify(ok)), 'j1')).toEqual(ok);
    // keys the contract does not name are ignored
    const more = { ...ok, note: 'from a newer producer' };
    expect(parseJobData(more, 'j0')).toEqual(more);
    const bad: unknown[] = [
      null,
      { ...ok, v: 2 },
      { ...ok, scope: 'book' },
      { ...ok, scope: [1] },
      { ...ok, stage: 3 },
      { ...ok, buildId: 4 },
      { ...ok, reason: 5 },
      { ...ok, class: 'other' },
      { ...ok, deferrals: '1' },
    ];
    for (const data of bad) {
      let error: unknown;
      try {
        parseJobData(data, 'job-7');
      } catch (e) {
        error = e;
      }
      expect({ data, error }).toEqual({ data, error: expect.any(InvalidJobDataError) });
      expect((error as InvalidJobDataError).code).toBe('INVALID_JOB_DATA');
      expect((error as InvalidJobDataError).jobId).toBe('job-7');
      expect((error as Error).message).toContain('job-7');
    }
    // without a job id the message says so with `?`
    expect(thrownMessage(() => parseJobData({}, undefined))).toContain('dispatch job ?:');
  });

  it('FRESH_CHAIN is all zeros and frozen', () => {
    expect(FRESH_CHAIN).toEqual({ capacity: 0, idempotent: 0, failures: 0 });
    expect(Object.isFrozen(FRESH_CHAIN)).toBe(true);
  });
});

describe('C20: stages whose ids extend one another get distinct keys and job ids', () => {
  const a: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };
  it.each([
    ['a longer stage kind', { scope: ['book-1', 'ch-2'], stage: 'imagex' }],
    ['a deeper scope', { scope: ['book-1', 'ch-2', 'image'], stage: 'x' }],
    ['an encoded "@"', { scope: ['book-1', 'ch-2'], stage: 'image@cap' }],
  ] as [string, StageRef][])('%s: enqueue, deferral and cancel of one never touch the other', async (_what, b) => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    expect(stageId(a)).not.toBe(stageId(b));
    expect(h.engine.deferredStageKey(a)).not.toBe(h.engine.deferredStageKey(b));
    const [ea, eb] = [await h.engine.enqueue(a, {}), await h.engine.enqueue(b, {})];
    expect([ea.added, eb.added]).toEqual([true, true]);
    expect(ea.jobId).not.toBe(eb.jobId);
    // each stage defers with its own wake-up, whose id starts with its own stage id and '@'
    h.executor.script(a, notSent('no_worker_available'));
    h.executor.script(b, notSent('no_worker_available'));
    await h.engine.dispatchStage(a, {});
    await h.engine.dispatchStage(b, {});
    const listed = await h.engine.listDeferred(['book-1']);
    const wakeUps = [a, b].map((r) => listed.find((d) => stageId(d.ref) === stageId(r))?.wakeUpJobId ?? '');
    expect(wakeUps.map((id, i) => id.startsWith(`${stageId([a, b][i]!)}@`))).toEqual([true, true]);
    expect(wakeUps[0]).not.toBe(wakeUps[1]);
    for (const id of [...wakeUps, ea.jobId!, eb.jobId!]) {
      expect(id).not.toMatch(/:/);
      expect(id).not.toMatch(/^\d+$/);
    }
    // cancelling one leaves the other deferred, its wake-up and its waiting job in place
    await h.engine.cancelActiveDispatch(a);
    expect([await h.engine.isStageDeferred(a), await h.engine.isStageDeferred(b)]).toEqual([false, true]);
    expect(await h.engine.queue.getJobState(wakeUps[1]!)).toBe('delayed');
    expect(await h.engine.queue.getJobState(eb.jobId!)).toBe('waiting');
  });
});

describe('C20: a stage id may hold `!` (percent-encoding keeps it; a cleared licence ends in one)', () => {
  it('such a stage deferred is listed with its wake-up, and its cancel removes that wake-up', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const bang: StageRef = { scope: ['book!1'], stage: 'image!' };
    expect(stageId(bang)).toBe('book!1/image!');
    h.executor.script(bang, notSent('no_worker_available'));
    await h.engine.dispatchStage(bang, {});
    const listed = await h.engine.listDeferred(['book!1']);
    expect(listed.map((d) => d.ref)).toEqual([bang]);
    const wakeUp = listed[0]!.wakeUpJobId;
    expect(await h.engine.queue.getJobState(wakeUp)).toBe('delayed');
    expect(await h.engine.cancelStage(bang)).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    expect(await h.engine.queue.getJob(wakeUp)).toBeUndefined();
  });
});
