import { createDispatchEngine, noCapacity, type DispatchEngineOptions, type ExecutorResult } from '../../../src';

/**
 * The executor's `reason` is typed: a built-in reason or one listed in the engine's `outcomes`.
 * These checks are the compiler's (`npm run typecheck`, run by `npm test`): each
 * `@ts-expect-error` fails the check when the line it marks compiles. The options are built
 * and never given to a live engine, so nothing connects.
 */
const connection = { host: '127.0.0.1', port: 1, lazyConnect: true };

/** Type-checks its options as `createDispatchEngine` does, without opening a connection. */
function options<P = unknown, const R extends string = never>(o: DispatchEngineOptions<P, R>): typeof o {
  return o;
}
// the same signature as the engine's factory: a change to one and not the other fails here
const factory: <P = unknown, const R extends string = never>(o: DispatchEngineOptions<P, R>) => unknown =
  createDispatchEngine;

describe('C5: a reason is typed as the built-in ones plus the engine’s own', () => {
  it('built-in reasons and reasons listed in `outcomes` compile; a typo does not', () => {
    const builtIn = options({ connection, executor: async () => ({ dispatched: false, reason: 'no_capacity' }) });
    const own = options({
      connection,
      outcomes: { capacity: ['gpu_busy'], idempotent: ['already_rendered'] },
      executor: async () => ({ dispatched: false, reason: Math.random() < 0.5 ? 'gpu_busy' : 'already_rendered' }),
    });
    const helper = options({
      connection,
      outcomes: { capacity: ['gpu_busy'] },
      executor: async () => noCapacity({ reason: 'gpu_busy', retryAfterMs: 1000 }),
    });
    // @ts-expect-error a reason neither built in nor listed in `outcomes`
    options({ connection, executor: async () => ({ dispatched: false, reason: 'no_capcity' }) });
    options({
      connection,
      outcomes: { capacity: ['gpu_busy'] },
      // @ts-expect-error the executor's typo is not taken as one more reason of the engine's own
      executor: async () => ({ dispatched: false, reason: 'gpu_bussy' }),
    });
    options({
      connection,
      outcomes: { capacity: ['gpu_busy'] },
      // @ts-expect-error noCapacity's reason is checked the same way
      executor: async () => noCapacity({ reason: 'gpu_bussy' }),
    });
    // a reason only known at run time: name `string` as the reasons (`createDispatchEngine<Payload, string>`)
    const dynamic = options<unknown, string>({
      connection,
      executor: async (): Promise<ExecutorResult<string>> => ({ dispatched: false, reason: String(Date.now()) }),
    });
    expect([builtIn, own, helper, dynamic].map((o) => typeof o.executor)).toEqual([
      'function',
      'function',
      'function',
      'function',
    ]);
    expect(typeof factory).toBe('function');
  });
});
