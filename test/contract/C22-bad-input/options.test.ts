import {
  createDispatchEngine,
  DEFERRED_IDEMPOTENT_TTL_S,
  DEFERRED_STAGE_TTL_S,
  InvalidOptionsError,
  type DispatchEngineOptions,
} from '../../../src';
import { nearestKey, resolveOptions } from '../../../src/options';
import { redisOptions } from '../../helpers/redis';

/**
 * "a clean first hour": a misspelt option is refused, not dropped
 * in silence with its default used. Nothing here reaches Redis: options are
 * validated before the engine opens anything (test/contract/C25-start-up/connection.test.ts proves
 * that part).
 */
const base = {
  connection: { ...redisOptions(), lazyConnect: true },
  executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
};

function refusal(extra: object): InvalidOptionsError {
  try {
    createDispatchEngine({ ...base, ...extra } as DispatchEngineOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect(error).toMatchObject({ code: 'INVALID_OPTIONS' });
    return error as InvalidOptionsError;
  }
  throw new Error(`${JSON.stringify(extra)} was accepted`);
}

describe('C22: strict top-level options', () => {
  it.each([
    ['lockMS', 'lockMs', 5000],
    ['window', 'windows', { capacitySeconds: 10 }],
    ['LOCKMS', 'lockMs', 5000],
    ['inflightRetryMS', 'inFlightRetryMs', 10],
    ['queuename', 'queueName', 'q'],
    ['retrys', 'retry', { attempts: 2 }],
    ['jobLogs', 'jobLog', false],
    ['exector', 'executor', base.executor],
  ])('`%s` is refused: did you mean `%s`?', (key, known, value) => {
    const { message } = refusal({ [key]: value });
    expect(message).toBe(`Unknown option \`${key}\`: did you mean \`${known}\`?`);
  });

  it('an unknown option that is no near miss is refused and the known ones are listed', () => {
    const { message } = refusal({ concurrency: 20 });
    expect(message).toMatch(/^Unknown option `concurrency` \(known: `connection`, `queueName`, `prefix`, `executor`, /);
    expect(message).not.toContain('did you mean');
  });

  it('a misspelt nested option gets its full path in the suggestion', () => {
    expect(refusal({ windows: { capacitySecond: 10 } }).message).toContain(
      'Unknown option `windows.capacitySecond`: did you mean `windows.capacitySeconds`?',
    );
    expect(refusal({ retry: { backoff: { type: 'fixed', dealy: 10 } } }).message).toContain(
      'Unknown option `retry.backoff.dealy`: did you mean `retry.backoff.delay`?',
    );
  });

  it('every unknown option is named first, then the other problems', () => {
    const parts = refusal({ inFlightRetryMs: 0, lockMS: 1, window: {}, jitter: 0.1 }).message.split('; ');
    expect(parts).toHaveLength(4);
    expect(parts[0]).toBe('Unknown option `lockMS`: did you mean `lockMs`?');
    expect(parts[1]).toBe('Unknown option `window`: did you mean `windows`?');
    expect(parts[2]).toMatch(/^Unknown option `jitter` \(known: .*`windows`/);
    expect(parts[3]).toMatch(/^Expected `inFlightRetryMs`: .*, got 0$/);
  });

  it('every documented option is still accepted', () => {
    const options: Required<DispatchEngineOptions> = {
      ...base,
      queueName: 'q-options',
      prefix: 'p-options',
      rollback: async () => undefined,
      journal: async () => undefined,
      resourceOf: () => 'gpu-pool',
      lineOrder: 'roundRobin',
      outcomes: { capacity: ['gpu_pool_full'], idempotent: ['already_rendered'] },
      windows: { capacitySeconds: 10, capacityMaxSeconds: 40, idempotentSeconds: 60, jitter: 0.1 },
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 10 } },
      limits: { maxCapacityDeferrals: 5, maxIdempotentDeferrals: 2 },
      lockMs: 5000,
      inFlightRetryMs: 100,
      maxClockSkewMs: 500,
      jobLog: false,
      removeOnComplete: { count: 100 },
      waitForReplicas: { replicas: 1, timeoutMs: 100 },
      faultHook: () => undefined,
    };
    expect(resolveOptions(options)).toMatchObject({ lockMs: 5000, windows: { capacityMaxSeconds: 40 } });
  });
});

describe('C22: removeOnComplete in BullMQ’s shape', () => {
  it.each([[{}], [{ age: -1 }], [-1], ['yes'], [{ count: 1, keep: true }]])('%j is refused', (bad) => {
    expect(refusal({ removeOnComplete: bad }).message).toContain('removeOnComplete');
  });
});

describe('C22: nearestKey', () => {
  const known = ['lockMs', 'windows', 'limits', 'retry'];
  it.each([
    ['lockMS', 'lockMs'], // case only
    ['LOCKMS', 'lockMs'], // case only, however far apart
    ['window', 'windows'], // one edit
    ['lckM', 'lockMs'], // two edits
    ['limit', 'limits'],
  ])('%s → %s', (key, want) => {
    expect(nearestKey(key, known)).toBe(want);
  });

  it('three edits or more is no near miss', () => {
    expect(nearestKey('lck', known)).toBeUndefined();
    expect(nearestKey('concurrency', known)).toBeUndefined();
  });
});

describe('C22: the documented defaults (README, "Options")', () => {
  it('windows default to 30 s capacity, 300 s idempotent, jitter 0.2, the adaptive maximum the capacity window (no backoff); the exported constants say the same', () => {
    expect(DEFERRED_STAGE_TTL_S).toBe(30);
    expect(DEFERRED_IDEMPOTENT_TTL_S).toBe(300);
    const expected = { capacitySeconds: 30, capacityMaxSeconds: 30, idempotentSeconds: 300, jitter: 0.2 };
    expect(resolveOptions(base).windows).toEqual(expected);
    // a windows object that gives one field gets the others' defaults
    expect(resolveOptions({ ...base, windows: { capacitySeconds: 5 } }).windows).toEqual({
      ...expected,
      capacitySeconds: 5,
      capacityMaxSeconds: 5,
    });
  });
});
