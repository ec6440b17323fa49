export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function pool<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i] as T, i);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** Runs each variant once per round, in order A B A B ..., so machine noise hits all of them. */
export async function interleave<K extends string, R>(
  rounds: number,
  variants: readonly K[],
  run: (variant: K, round: number) => Promise<R>,
): Promise<Record<K, R[]>> {
  const out = Object.fromEntries(variants.map((v) => [v, [] as R[]])) as Record<K, R[]>;
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) out[v].push(await run(v, r));
  }
  return out;
}

export function fmt(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return String(n);
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
}
