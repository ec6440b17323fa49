/**
 * Waits for `work` at most `ms`: true when it settled in time (fulfilled or
 * rejected, its error dropped), false when the time ran out. The timer is
 * cleared either way, so it never holds the process open.
 */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = work.then(
    () => true as const,
    () => true as const,
  );
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
