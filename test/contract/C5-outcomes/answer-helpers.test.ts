import { CAPACITY_OUTCOMES, CapacityError, IDEMPOTENT_OUTCOMES, dispatched, noCapacity } from '../../../src';
import { OutcomeTable, capacityAnswer } from '../../../src/outcomes';

/**
 * The answer helpers build exactly the answer the executor could have written by hand, and a
 * thrown `CapacityError` (or a copy of the class from another bundle, told by its name) stands
 * for `noCapacity()`. No Redis: what the engine does with these answers is C1 and C5's suites.
 */
describe('C5: the answer helpers build the answers a user would write', () => {
  it('noCapacity() is { dispatched: false, jobs: 0, reason: no_capacity }, with retryAfterMs only when given', () => {
    expect(noCapacity()).toStrictEqual({ dispatched: false, jobs: 0, reason: 'no_capacity' });
    expect(noCapacity({ retryAfterMs: 0 })).toStrictEqual({
      dispatched: false,
      jobs: 0,
      reason: 'no_capacity',
      retryAfterMs: 0,
    });
    expect(noCapacity({ reason: 'duplicate_pending', retryAfterMs: 1500 })).toStrictEqual({
      dispatched: false,
      jobs: 0,
      reason: 'duplicate_pending',
      retryAfterMs: 1500,
    });
  });

  it('dispatched() leaves jobs out unless given', () => {
    expect(dispatched()).toStrictEqual({ dispatched: true, reason: null });
    expect(dispatched(0)).toStrictEqual({ dispatched: true, jobs: 0, reason: null });
    expect(dispatched(3)).toStrictEqual({ dispatched: true, jobs: 3, reason: null });
  });
});

describe('C5: a thrown CapacityError stands for a capacity answer', () => {
  it('its defaults: name, message, reason no_capacity, no hint', () => {
    const e = new CapacityError();
    expect({ name: e.name, message: e.message, reason: e.reason, retryAfterMs: e.retryAfterMs }).toStrictEqual({
      name: 'CapacityError',
      message: 'No capacity: no_capacity',
      reason: 'no_capacity',
      retryAfterMs: undefined,
    });
    expect(new CapacityError({ reason: 'gpu_busy' }).message).toBe('No capacity: gpu_busy');
    expect(capacityAnswer(e)).toStrictEqual({ dispatched: false, jobs: 0, reason: 'no_capacity' });
  });

  it('its hint counts from 0 ms; a hint that is no number of ms (NaN, negative, a string) is none', () => {
    expect(capacityAnswer(new CapacityError({ retryAfterMs: 0 }))).toStrictEqual({
      dispatched: false,
      jobs: 0,
      reason: 'no_capacity',
      retryAfterMs: 0,
    });
    for (const retryAfterMs of [NaN, -1, '500' as unknown as number])
      expect(capacityAnswer(new CapacityError({ retryAfterMs }))).not.toHaveProperty('retryAfterMs');
  });

  it('a copy of the class from another bundle is told by its name; an empty reason is no_capacity', () => {
    const copy = Object.assign(new Error('elsewhere'), { name: 'CapacityError', reason: '', retryAfterMs: 250 });
    expect(capacityAnswer(copy)).toStrictEqual({
      dispatched: false,
      jobs: 0,
      reason: 'no_capacity',
      retryAfterMs: 250,
    });
    expect(capacityAnswer({ name: 'CapacityError', reason: 'gpu_busy' })).toMatchObject({ reason: 'gpu_busy' });
  });

  it('anything else is no capacity answer: other errors, a bare name, null, a name that throws', () => {
    const hostile = {
      get name(): string {
        throw new Error('no');
      },
    };
    for (const thrown of [new Error('down'), 'CapacityError', null, undefined, { name: 'RateLimitError' }, hostile])
      expect(capacityAnswer(thrown)).toBeUndefined();
  });
});

describe('C5: the outcome table', () => {
  it('lists the built-in reasons first, then the engine’s own, and says so in an error message', () => {
    const table = new OutcomeTable({ capacity: ['gpu_busy'], idempotent: ['already_rendered'] });
    expect(new OutcomeTable().capacity).toStrictEqual([...CAPACITY_OUTCOMES]);
    expect(new OutcomeTable().idempotent).toStrictEqual([...IDEMPOTENT_OUTCOMES]);
    expect(table.describe()).toBe(
      `capacity: ${[...CAPACITY_OUTCOMES, 'gpu_busy'].join(', ')}; idempotent: ${[...IDEMPOTENT_OUTCOMES, 'already_rendered'].join(', ')}`,
    );
  });

  it('a tie goes to the reason listed first, whatever the order of the counts', () => {
    const table = new OutcomeTable({ capacity: ['gpu_busy'] });
    const [first, second] = CAPACITY_OUTCOMES;
    expect(
      table.dominant(
        new Map([
          [second, 2],
          [first, 2],
        ]),
      ),
    ).toBe(first);
    expect(
      table.dominant(
        new Map([
          [first, 2],
          [second, 2],
        ]),
      ),
    ).toBe(first);
    expect(
      table.dominant(
        new Map([
          ['gpu_busy', 2],
          [second, 2],
        ]),
      ),
    ).toBe(second);
    // a higher count wins over the order, and a reason listed later wins no tie it did not win
    expect(
      table.dominant(
        new Map([
          [first, 1],
          ['gpu_busy', 2],
        ]),
      ),
    ).toBe('gpu_busy');
    expect(
      table.dominant(
        new Map([
          [second, 3],
          [first, 3],
          ['gpu_busy', 3],
        ]),
      ),
    ).toBe(first);
  });
});
