import {
  AggregationTemporality,
  MeterProvider,
  MetricReader,
  type CollectionResult,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { instrumentEngine, type DispatchEngineOptions, type StageRef } from '../../src';
import { main } from '../../src/cli';
import { REDIS_URL } from '../cli/run';
import { harness } from './engine';

/** A metric reader the test collects from by hand (cumulative sums). */
export class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** The sum of `stage_deferral.wakeups` over its data points, by `early` ('true' / 'false'). */
export async function wakeupsOf(reader: MetricReader): Promise<{ total: number; early: number }> {
  const { resourceMetrics }: CollectionResult = await reader.collect();
  const all: MetricData[] = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  const points: { value: unknown; attributes: Record<string, unknown> }[] =
    all.find((x) => x.descriptor.name === 'stage_deferral.wakeups')?.dataPoints ?? [];
  const sum = (ps: typeof points) => ps.reduce((acc, p) => acc + (p.value as number), 0);
  return { total: sum(points), early: sum(points.filter((p) => p.attributes['stage_deferral.early'] === true)) };
}

/** Runs the ops CLI in this process (its own short-lived engine) on one queue; stdout captured, stderr dropped. */
export async function cliInProcess(on: { prefix: string; queueName: string }, ...args: string[]) {
  const out: string[] = [];
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  const e = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const code = await main(['--redis', REDIS_URL, '--queue', on.queueName, '--prefix', on.prefix, ...args]);
    return { code, stdout: out.join('') };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

/**
 * A harness whose engine is instrumented on a meter of its own: `reader`
 * collects its metrics, `woken` its `woken` events; `done()` stops the instrumentation.
 */
export function instrumentedHarness(overrides: Partial<DispatchEngineOptions>) {
  const h = harness(overrides);
  const reader = new TestReader();
  const provider = new MeterProvider({ readers: [reader] });
  const stop = instrumentEngine(h.engine, { meter: provider.getMeter('test'), deferredGauge: false });
  const woken: { ref: StageRef; jobId: string; early?: true }[] = [];
  h.engine.on('woken', (e) => woken.push(e));
  const done = async () => {
    stop();
    await provider.shutdown();
  };
  return { h, reader, woken, done };
}
