import { CapacityError, dispatched, InvalidResourceError, noCapacity, type StageRef } from '../../../src';
import { harness, snapshot } from '../../helpers/engine';
import { thrown } from '../../helpers/thrown';

const a: StageRef = { scope: ['book-b', 'sc-1'], stage: 'image' };
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('C31: bad resource input is a typed error before anything is written', () => {
  // the message names resourceOf and says what was expected and what came (a long name cut at 60 characters)
  it.each([
    ['', 'a non-empty string, got ""'],
    [42, 'a string, got 42'],
    ['x'.repeat(201), `at most 200 characters, got "${'x'.repeat(60)}"`],
    ['\ud800', 'well-formed Unicode (no lone surrogate), got "\\ud800"'],
  ])('resourceOf answering %j', async (bad, says) => {
    const h = harness({ resourceOf: () => bad as string });
    await h.engine.waitUntilReady();
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.dispatchStage(a, {})).rejects.toMatchObject({
      code: 'INVALID_RESOURCE',
      message: expect.stringMatching(new RegExp(`^resourceOf: expected \`resource\` to be ${escape(says)}$`)),
    });
    expect(h.executor.calls).toHaveLength(0);
    expect(await snapshot(h.redis, h.prefix)).toEqual(before);
  });

  it('the answer builders refuse an empty resource and a capacityLeft that is not a count, naming the builder', () => {
    expect(thrown(() => noCapacity({ resource: '' }), InvalidResourceError)?.message).toMatch(
      /^noCapacity: expected `resource` /,
    );
    expect(thrown(() => new CapacityError({ resource: '' }), InvalidResourceError)?.message).toMatch(
      /^CapacityError: expected `resource` /,
    );
    for (const n of [-1, 1.5, Number.NaN])
      expect(thrown(() => dispatched(1, { capacityLeft: n }), InvalidResourceError)?.message).toMatch(
        /^dispatched: expected `capacityLeft` /,
      );
    expect(dispatched(1, { capacityLeft: 0 })).toEqual({ dispatched: true, jobs: 1, reason: null, capacityLeft: 0 });
  });

  it('an answer naming an empty resource is refused; a dispatch with a bad capacityLeft stands, reported', async () => {
    const h = harness({ resourceOf: () => 'gpu' });
    h.executor.script(a, { dispatched: false, reason: 'no_capacity', resource: '' });
    await expect(h.engine.dispatchStage(a, {})).rejects.toMatchObject({ code: 'INVALID_EXECUTOR_RESULT' });
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    const reported: unknown[] = [];
    h.engine.on('resultInvalid', (e) => reported.push(e.error.message));
    h.executor.script(a, { dispatched: true, reason: null, capacityLeft: -2 });
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ dispatched: true });
    expect(reported).toEqual([expect.stringContaining('`capacityLeft` to be a count')]);
  });

  it('wakeDeferred refuses an empty resource, and a resource with a scope or stage', async () => {
    const h = harness();
    await expect(h.engine.wakeDeferred({ resource: '' })).rejects.toMatchObject({
      code: 'INVALID_RESOURCE',
      message: expect.stringContaining('wakeDeferred: expected `resource`'),
    });
    const alone = { code: 'INVALID_OPTIONS', message: expect.stringContaining('`resource` alone') };
    await expect(h.engine.wakeDeferred({ resource: 'gpu', stage: 'image' })).rejects.toMatchObject(alone);
    await expect(h.engine.wakeDeferred({ resource: 'gpu', scope: ['book-1'] })).rejects.toMatchObject(alone);
  });
});
