import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
  type CollectionResult,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { createNoopMeter, metrics } from '@opentelemetry/api';
import { instrumentEngine, type DispatchEngine, type ExecutorResult, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { endsChain, interceptBatch } from '../../helpers/faults';

/** A reader the test collects from by hand (cumulative). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const ref = (sc: string, stage = 'image'): StageRef => ({ scope: ['book-1', sc], stage });
const A = ref('sc-a');
const B = ref('sc-b');
const C = ref('sc-c', 'video');
const D = ref('sc-d');
const E = ref('sc-e');

const answers: Record<string, () => Promise<ExecutorResult<string>>> = {
  'sc-b2': async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
  'sc-a': async () => ({ dispatched: true, jobs: 2, reason: null }),
  'sc-b': async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
  'sc-c': async () => ({ dispatched: false, jobs: 0, reason: 'already_completed' }),
  'sc-d': async () => {
    throw new TypeError('renderer crashed');
  },
  'sc-e': async () => ({ dispatched: false, jobs: 0, reason: 'gpu_on_fire' }),
};

interface Setup {
  engine: DispatchEngine;
  provider: MeterProvider;
  reader: TestReader;
  queueName: string;
  /** Stops the instrumentation made on the test's own meter. */
  stop: () => void;
}

// Every test makes its own engine (harness(): torn down after the test), queue and meter provider, so each runs alone (`-t`).
const providers: MeterProvider[] = [];

function setup(): Setup {
  const { engine, queueName } = harness({
    windows: { capacitySeconds: 300, idempotentSeconds: 600 },
    executor: (r) => answers[r.scope[1] as string]!(),
  });
  const reader = new TestReader();
  const provider = new MeterProvider({ readers: [reader] });
  providers.push(provider);
  const stop = instrumentEngine(engine, { meter: provider.getMeter('test') });
  return { engine, provider, reader, queueName, stop };
}

/** One of each outcome: A dispatched, B deferred (capacity), C deferred (idempotent), D threw, E failed; then B suppressed twice. */
async function seed(engine: DispatchEngine): Promise<void> {
  for (const r of [A, B, C, D, E]) await engine.dispatchStage(r, null).catch(() => undefined);
  await engine.dispatchStage(B, null); // suppressed by B's deferral
  await engine.enqueue(B, null); // suppressed too, via enqueue
}

afterEach(async () => {
  metrics.disable();
  for (const provider of providers.splice(0)) await provider.shutdown();
});

async function collect(reader: MetricReader): Promise<MetricData[]> {
  const { resourceMetrics, errors }: CollectionResult = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
}

/** Sum of a counter's points whose attributes include `match`. */
function sum(all: MetricData[], name: string, match: Record<string, unknown> = {}): number {
  const m = all.find((x) => x.descriptor.name === name);
  if (!m) return 0;
  return m.dataPoints
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((acc, p) => acc + (p.value as number), 0);
}

const O = 'stage_deferral.dispatch.outcomes';

describe('C23: instrumentEngine', () => {
  it('counts dispatch outcomes by outcome, reason and class, and executor latency', async () => {
    const { engine, reader, queueName } = setup();
    await seed(engine);
    const all = await collect(reader);
    expect(sum(all, O, { 'stage_deferral.outcome': 'dispatched', 'stage_deferral.stage': 'image' })).toBe(1);
    expect(
      sum(all, O, {
        'stage_deferral.outcome': 'deferred',
        'stage_deferral.reason': 'no_worker_available',
        'stage_deferral.class': 'capacity',
      }),
    ).toBe(1);
    expect(
      sum(all, O, {
        'stage_deferral.outcome': 'deferred',
        'stage_deferral.reason': 'already_completed',
        'stage_deferral.class': 'idempotent',
        'stage_deferral.stage': 'video',
      }),
    ).toBe(1);
    expect(sum(all, O, { 'stage_deferral.outcome': 'failed', 'error.type': 'TypeError' })).toBe(1);
    expect(sum(all, O, { 'stage_deferral.outcome': 'failed', 'stage_deferral.reason': 'gpu_on_fire' })).toBe(1);
    expect(sum(all, O, { 'stage_deferral.outcome': 'suppressed', 'stage_deferral.class': 'capacity' })).toBe(1);
    expect(sum(all, O)).toBe(6);
    expect(sum(all, O, { 'messaging.destination.name': queueName })).toBe(6);

    expect(sum(all, 'stage_deferral.deferrals.started')).toBe(2);
    expect(sum(all, 'stage_deferral.ticks.suppressed', { 'stage_deferral.via': 'dispatch' })).toBe(1);
    expect(sum(all, 'stage_deferral.ticks.suppressed', { 'stage_deferral.via': 'enqueue' })).toBe(1);

    const h = all.find((x) => x.descriptor.name === 'stage_deferral.executor.duration')!;
    expect(h.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(h.descriptor.unit).toBe('s');
    const count = h.dataPoints.reduce((acc, p) => acc + (p.value as { count: number }).count, 0);
    expect(count).toBe(5); // one per executor call; suppressed dispatches never call it
  });

  it('observes the stages deferred now with one cheap read', async () => {
    const { engine, reader, queueName } = setup();
    await seed(engine);
    const all = await collect(reader);
    const g = all.find((x) => x.descriptor.name === 'stage_deferral.stages.deferred')!;
    expect(g.dataPointType).toBe(DataPointType.GAUGE);
    expect(g.dataPoints.map((p) => [p.value, p.attributes['messaging.destination.name']])).toEqual([[2, queueName]]);
    expect(await engine.listDeferred()).toHaveLength(2); // B (capacity) and C (idempotent)
  });

  it('counts cancels and clears', async () => {
    const { engine, reader } = setup();
    await seed(engine);
    await engine.cancelActiveDispatch(C);
    expect(await engine.clearDeferrals(['book-1'])).toBe(1);
    const all = await collect(reader);
    expect(sum(all, 'stage_deferral.cancels', { 'stage_deferral.had_deferral': true })).toBe(1);
    expect(sum(all, 'stage_deferral.clears')).toBe(1);
    expect(sum(all, 'stage_deferral.clears.deferrals')).toBe(1);
  });

  it('exports to Prometheus under the documented names', async () => {
    const { engine, reader } = setup();
    await seed(engine);
    const text = new PrometheusSerializer().serialize((await reader.collect()).resourceMetrics);
    expect(text).toMatch(/^stage_deferral_dispatch_outcomes_total\{.*stage_deferral_outcome="deferred".*\} 1/m);
    expect(text).toMatch(/^stage_deferral_executor_duration_bucket\{.*le="0\.005"\} \d+/m);
    expect(text).toMatch(/^stage_deferral_stages_deferred\{messaging_destination_name="q-[0-9a-f]+".*\} 2/m);
    expect(text).toContain('# TYPE stage_deferral_ticks_suppressed_total counter');
  });

  it('counts writes the replicas did not acknowledge, by op (a single Redis has no replica to WAIT for)', async () => {
    const { provider, reader } = setup();
    const { engine: lagging } = harness({
      waitForReplicas: { replicas: 1, timeoutMs: 1 },
      executor: answers['sc-b']!,
      windows: undefined,
    });
    const lags: unknown[] = [];
    lagging.on('replicaLag', (e) => lags.push(e));
    const stopLagging = instrumentEngine(lagging, { meter: provider.getMeter('lagging'), deferredGauge: false });
    try {
      const result = await lagging.dispatchStage(B, null);
      expect(result.reason).toBe('no_worker_available');
      expect(await lagging.isStageDeferred(B)).toBe(true); // the write stands on the master
      expect(lags).toEqual([{ op: 'defer', writes: 1, acked: 0, wanted: 1, skipMs: 10 }]);
      expect(sum(await collect(reader), 'stage_deferral.replica.lags', { 'stage_deferral.op': 'defer' })).toBe(1);
    } finally {
      stopLagging();
    }
  });

  it('counts dispatched attempts whose release got no answer in three tries, by stage', async () => {
    const { engine, reader } = setup();
    const faults = await interceptBatch({ engine }, endsChain);
    const result = await engine.dispatchStage(A, null);
    expect(result).toMatchObject({ dispatched: true });
    expect(faults.faults()).toBe(3);
    const all = await collect(reader);
    expect(sum(all, 'stage_deferral.release.failures', { 'stage_deferral.stage': 'image' })).toBe(1);
    expect(sum(all, O, { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
  });

  it('counts dispatches whose executor answered dispatched: true in a result of the wrong shape, by stage', async () => {
    const { provider, reader } = setup();
    const { engine } = harness({
      executor: async () => ({ dispatched: true, jobs: '1' }) as unknown as ExecutorResult<string>,
    });
    const stopIt = instrumentEngine(engine, { meter: provider.getMeter('invalid'), deferredGauge: false });
    try {
      expect(await engine.dispatchStage(A, null)).toMatchObject({ dispatched: true });
      const all = await collect(reader);
      expect(sum(all, 'stage_deferral.results.invalid', { 'stage_deferral.stage': 'image' })).toBe(1);
      expect(sum(all, O, { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
    } finally {
      stopIt();
    }
  });

  it("counts a Worker host's clock found leading Redis' past maxClockSkewMs, once per crossing (clockSkew: { leadMs, maxClockSkewMs })", async () => {
    const { provider, reader } = setup();
    const real = Date.now.bind(Date);
    const ahead = jest.spyOn(Date, 'now').mockImplementation(() => real() + 3000);
    const { engine } = harness({ maxClockSkewMs: 500, executor: answers['sc-a']! });
    const skews: unknown[] = [];
    engine.on('clockSkew', (e) => skews.push(e));
    const stopIt = instrumentEngine(engine, { meter: provider.getMeter('skewed'), deferredGauge: false });
    try {
      expect(typeof engine.processor).toBe('function'); // a Worker host
      await engine.waitUntilReady();
      await engine.dispatchStage(A, null);
      expect(skews).toEqual([{ leadMs: expect.any(Number), maxClockSkewMs: 500 }]);
      expect(Object.keys(skews[0] as object).sort()).toEqual(['leadMs', 'maxClockSkewMs']);
      expect(sum(await collect(reader), 'stage_deferral.clock.skews')).toBe(1);
    } finally {
      ahead.mockRestore();
      stopIt();
    }
  });

  it('stops counting once stopped', async () => {
    const { engine, reader, stop } = setup();
    await seed(engine);
    expect(sum(await collect(reader), O, { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
    stop();
    await engine.dispatchStage(A, null);
    const before = await engine.queue.getDelayedCount();
    await engine.dispatchStage(ref('sc-b2'), null); // a new deferral: one more delayed wake-up
    const after = await engine.queue.getDelayedCount();
    expect(after).toBe(before + 1);
    const all = await collect(reader);
    expect(sum(all, O, { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
    expect(sum(all, 'stage_deferral.deferrals.started')).toBe(2);
    const g = all.find((x) => x.descriptor.name === 'stage_deferral.stages.deferred');
    expect((g?.dataPoints ?? []).map((p) => p.value)).not.toContain(after);
  });

  it("is a no-op without an SDK (the API's no-op meter), and reports through the global provider once one is installed", async () => {
    const { engine, stop } = setup();
    stop(); // only the global provider, below, may see this engine
    const meters = jest.spyOn(metrics, 'getMeter');
    const globalReader = new TestReader();
    const globalProvider = new MeterProvider({ readers: [globalReader] });
    try {
      // no SDK: the global provider is the API's own no-op one (fresh global state)
      metrics.disable();
      const off = instrumentEngine(engine);
      expect(meters).toHaveBeenCalledWith('bullmq-stage-deferral');
      const noop = meters.mock.results.at(-1)!.value as object;
      expect(noop.constructor).toBe(createNoopMeter().constructor);
      expect(await engine.dispatchStage(A, null)).toMatchObject({ dispatched: true });
      expect(await engine.dispatchStage(B, null)).toMatchObject({ reason: 'no_worker_available' });
      off();

      // with an SDK installed, the same call (no `meter`) reports through it, under the library's meter name
      expect(metrics.setGlobalMeterProvider(globalProvider)).toBe(true);
      const offGlobal = instrumentEngine(engine);
      expect(await engine.dispatchStage(A, null)).toMatchObject({ dispatched: true });
      offGlobal();
      const { resourceMetrics } = await globalReader.collect();
      expect(resourceMetrics.scopeMetrics.map((s) => s.scope.name)).toEqual(['bullmq-stage-deferral']);
      const all = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
      expect(sum(all, O, { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
      expect(sum(all, O)).toBe(1);
    } finally {
      meters.mockRestore();
      metrics.disable();
      await globalProvider.shutdown();
    }
  });
});
