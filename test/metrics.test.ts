import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
  type CollectionResult,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  createDispatchEngine,
  instrumentEngine,
  type DispatchEngine,
  type ExecutorResult,
  type StageRef,
} from '../src';
import { client, closeClients, dropPrefix, isolated } from './helpers/redis';

/** A reader the test collects from by hand (cumulative). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const { prefix, queueName } = isolated();
const ref = (sc: string, stage = 'image'): StageRef => ({ scope: ['book-1', sc], stage });
const A = ref('sc-a');
const B = ref('sc-b');
const C = ref('sc-c', 'video');
const D = ref('sc-d');
const E = ref('sc-e');

const answers: Record<string, () => Promise<ExecutorResult>> = {
  'sc-b2': async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
  'sc-a': async () => ({ dispatched: true, jobs: 2, reason: null }),
  'sc-b': async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
  'sc-c': async () => ({ dispatched: false, jobs: 0, reason: 'already_completed' }),
  'sc-d': async () => {
    throw new TypeError('renderer crashed');
  },
  'sc-e': async () => ({ dispatched: false, jobs: 0, reason: 'gpu_on_fire' }),
};

let engine: DispatchEngine;
let provider: MeterProvider;
let reader: TestReader;
let stop: () => void;

beforeAll(async () => {
  engine = createDispatchEngine({
    connection: client(),
    prefix,
    queueName,
    windows: { capacitySeconds: 300, idempotentSeconds: 600 },
    executor: (r) => answers[r.scope[1] as string]!(),
  });
  reader = new TestReader();
  provider = new MeterProvider({ readers: [reader] });
  stop = instrumentEngine(engine, { meter: provider.getMeter('test') });
});

afterAll(async () => {
  await provider.shutdown();
  await engine.close();
  await dropPrefix(client(), prefix);
  await closeClients();
});

async function collect(): Promise<MetricData[]> {
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

describe('instrumentEngine', () => {
  it('counts dispatch outcomes by outcome, reason and class, and executor latency', async () => {
    for (const r of [A, B, C, D, E]) await engine.dispatchStage(r, null).catch(() => undefined);
    await engine.dispatchStage(B, null); // suppressed by B's deferral
    await engine.enqueue(B, null); // suppressed too, via enqueue
    const all = await collect();
    const O = 'stage_deferral.dispatch.outcomes';
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
    const all = await collect();
    const g = all.find((x) => x.descriptor.name === 'stage_deferral.stages.deferred')!;
    expect(g.dataPointType).toBe(DataPointType.GAUGE);
    expect(g.dataPoints.map((p) => [p.value, p.attributes['messaging.destination.name']])).toEqual([[2, queueName]]);
    expect(await engine.listDeferred()).toHaveLength(2); // B (capacity) and C (idempotent)
  });

  it('counts cancels and clears', async () => {
    await engine.cancelActiveDispatch(C);
    expect(await engine.clearDeferrals(['book-1'])).toBe(1);
    const all = await collect();
    expect(sum(all, 'stage_deferral.cancels', { 'stage_deferral.had_deferral': true })).toBe(1);
    expect(sum(all, 'stage_deferral.clears')).toBe(1);
    expect(sum(all, 'stage_deferral.clears.deferrals')).toBe(1);
  });

  it('exports to Prometheus under the documented names', async () => {
    const text = new PrometheusSerializer().serialize((await reader.collect()).resourceMetrics);
    expect(text).toMatch(/^stage_deferral_dispatch_outcomes_total\{.*stage_deferral_outcome="deferred".*\} 1/m);
    expect(text).toMatch(/^stage_deferral_executor_duration_bucket\{.*le="0\.005"\} \d+/m);
    expect(text).toMatch(/^stage_deferral_stages_deferred\{messaging_destination_name="q-[0-9a-f]+".*\} \d+/m);
    expect(text).toContain('# TYPE stage_deferral_ticks_suppressed_total counter');
  });

  it('counts writes the replicas did not acknowledge, by op (a single Redis has no replica to WAIT for)', async () => {
    const names = isolated();
    const lagging = createDispatchEngine({
      connection: client(),
      ...names,
      waitForReplicas: { replicas: 1, timeoutMs: 1 },
      executor: answers['sc-b']!,
    });
    const lags: unknown[] = [];
    lagging.on('replicaLag', (e) => lags.push(e));
    const stopLagging = instrumentEngine(lagging, { meter: provider.getMeter('lagging'), deferredGauge: false });
    try {
      const result = await lagging.dispatchStage(B, null);
      expect(result.reason).toBe('no_worker_available');
      expect(await lagging.isStageDeferred(B)).toBe(true); // the write stands on the master
      expect(lags).toEqual([{ op: 'defer', writes: 1, acked: 0, wanted: 1, skipMs: 10 }]);
      expect(sum(await collect(), 'stage_deferral.replica.lags', { 'stage_deferral.op': 'defer' })).toBe(1);
    } finally {
      stopLagging();
      await lagging.close();
      await dropPrefix(client(), names.prefix);
    }
  });

  it('stops counting once stopped', async () => {
    stop();
    await engine.dispatchStage(A, null);
    const before = await engine.queue.getDelayedCount();
    await engine.dispatchStage(ref('sc-b2'), null); // a new deferral: one more delayed wake-up
    const after = await engine.queue.getDelayedCount();
    expect(after).toBe(before + 1);
    const all = await collect();
    expect(sum(all, 'stage_deferral.dispatch.outcomes', { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
    expect(sum(all, 'stage_deferral.deferrals.started')).toBe(2);
    const g = all.find((x) => x.descriptor.name === 'stage_deferral.stages.deferred');
    expect((g?.dataPoints ?? []).map((p) => p.value)).not.toContain(after);
  });

  it('is a no-op without an SDK (the global meter provider)', async () => {
    const off = instrumentEngine(engine);
    expect((await engine.dispatchStage(A, null)).dispatched).toBe(true);
    off();
    const all = await collect(); // the test's provider saw none of it
    expect(sum(all, 'stage_deferral.dispatch.outcomes', { 'stage_deferral.outcome': 'dispatched' })).toBe(1);
  });
});
