/**
 * What `f` throws, checked to be an instance of `type` when one is given; undefined
 * when it returns. (No Redis: the pure suites use it too.)
 */
export function thrown<E extends Error = Error>(
  f: () => unknown,
  type?: abstract new (...args: never[]) => E,
): E | undefined {
  try {
    f();
  } catch (e) {
    if (type) expect(e).toBeInstanceOf(type);
    return e as E;
  }
  return undefined;
}
