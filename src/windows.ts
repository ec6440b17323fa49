/** The window of a deferral: adaptive steps, hints, jitter. */
import type { ResolvedOptions } from './options';
import type { OutcomeClass } from './types';

/**
 * The window of a deferral, ms: for the n-th capacity deferral in a row,
 * `min(capacityMaxSeconds, capacitySeconds × 2^(n-1))` (a fixed window when
 * the maximum is the base), shortened by up to `jitter` at random; for an
 * idempotent one, `idempotentSeconds` likewise. A capacity outcome's
 * `retryAfterMs` (the downstream's own hint) replaces the step: clamped to
 * [50 ms, the maximum] and lengthened by up to `jitter`, never shortened, so
 * the stage never asks before the hint.
 */
export function windowFor(
  windows: ResolvedOptions['windows'],
  cls: OutcomeClass,
  deferrals: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  const maxMs = 1000 * windowMax(windows, cls);
  if (cls === 'capacity' && retryAfterMs !== undefined) {
    const hinted = Math.min(maxMs, Math.max(50, retryAfterMs));
    // rounded up: a fraction of a ms below the hint would ask before it
    return Math.min(Math.floor(maxMs), Math.ceil(hinted * (1 + windows.jitter * random())));
  }
  const base = cls === 'capacity' ? windows.capacitySeconds : windows.idempotentSeconds;
  // (an idempotent class's maximum is its base, so its step is the base for every n >= 1)
  const stepMs = Math.min(maxMs, 1000 * base * 2 ** Math.min(deferrals - 1, 40));
  return Math.max(1, Math.round(stepMs * (1 - windows.jitter * random())));
}

/** The longest window of a class, seconds. */
export function windowMax(windows: ResolvedOptions['windows'], cls: OutcomeClass): number {
  return cls === 'capacity' ? windows.capacityMaxSeconds : windows.idempotentSeconds;
}
