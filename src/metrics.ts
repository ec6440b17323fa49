import { metrics, type Attributes, type Meter, type ObservableResult } from '@opentelemetry/api';
import type { DispatchEngine } from './engine';
import type { EngineEventName, EngineEvents, EngineListener } from './events';
import { redisClient } from './bullmq/adapter';
import { encodeResource } from './resource';

/**
 * OpenTelemetry metrics for one engine, built on its events. Through
 * `@opentelemetry/api` only: a no-op until the application installs an SDK
 * (a `MeterProvider`). Names and attributes: docs/observability.md.
 */
export interface InstrumentOptions {
  /** The meter to create instruments on. Default: `metrics.getMeter('bullmq-stage-deferral')` (the global provider). */
  meter?: Meter;
  /**
   * Observe `stage_deferral.stages.deferred` (one `ZCARD` of the queue's delayed set per collection).
   * Default true; turn it off when several processes instrument one queue and
   * only one of them should report it.
   */
  deferredGauge?: boolean;
}

/** Attribute keys; values are bounded sets (never the scope, which is unbounded). */
export const METRIC_ATTRIBUTES = {
  queue: 'messaging.destination.name',
  outcome: 'stage_deferral.outcome',
  reason: 'stage_deferral.reason',
  class: 'stage_deferral.class',
  stage: 'stage_deferral.stage',
  via: 'stage_deferral.via',
  hadDeferral: 'stage_deferral.had_deferral',
  op: 'stage_deferral.op',
  early: 'stage_deferral.early',
  resource: 'stage_deferral.resource',
  errorType: 'error.type',
} as const;

/** Executor latency buckets, seconds: 5 ms .. 60 s. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Counts what the engine does and observes how many stages are deferred.
 * Returns a function that stops it (removes its listeners and the gauge callback).
 */
export function instrumentEngine<P>(engine: DispatchEngine<P>, options: InstrumentOptions = {}): () => void {
  const meter = options.meter ?? metrics.getMeter('bullmq-stage-deferral');
  const A = METRIC_ATTRIBUTES;
  const queue = { [A.queue]: engine.queue.name };

  const outcomes = meter.createCounter('stage_deferral.dispatch.outcomes', {
    description: 'Dispatch attempts by outcome: dispatched, deferred, suppressed (by an open deferral) or failed.',
    unit: '{attempt}',
  });
  const deferrals = meter.createCounter('stage_deferral.deferrals.started', {
    description: 'Deferrals begun (one per deferral, by the attempt that created it).',
    unit: '{deferral}',
  });
  const suppressed = meter.createCounter('stage_deferral.ticks.suppressed', {
    description: 'Dispatches or enqueues that found their stage deferred and did nothing.',
    unit: '{tick}',
  });
  const wakeUps = meter.createCounter('stage_deferral.wakeups', {
    description:
      'Stages woken, by the process that woke them: a wake-up job that started its stage’s dispatch at its window’s end or after a Promote, or (early = true) a deferral ended by wakeDeferred here.',
    unit: '{wakeup}',
  });
  const cancels = meter.createCounter('stage_deferral.cancels', {
    description: 'Calls of cancelActiveDispatch.',
    unit: '{cancel}',
  });
  const clears = meter.createCounter('stage_deferral.clears', {
    description: 'Calls of clearDeferrals.',
    unit: '{clear}',
  });
  const cleared = meter.createCounter('stage_deferral.clears.deferrals', {
    description: 'Deferrals ended by clearDeferrals.',
    unit: '{deferral}',
  });
  const replicaLags = meter.createCounter('stage_deferral.replica.lags', {
    description:
      'Writes the replicas did not acknowledge within waitForReplicas.timeoutMs (WAIT then skipped a while).',
    unit: '{write}',
  });
  const releaseFailures = meter.createCounter('stage_deferral.release.failures', {
    description:
      'Dispatched attempts whose release failed three tries (Redis unreachable or failing over): the dispatch stands.',
    unit: '{release}',
  });
  const invalidResults = meter.createCounter('stage_deferral.results.invalid', {
    description:
      'Dispatches whose executor answered dispatched: true in a result of the wrong shape (kept as dispatched).',
    unit: '{result}',
  });
  const clockSkews = meter.createCounter('stage_deferral.clock.skews', {
    description: 'Readings of this Worker host’s clock that crossed to leading Redis’ by more than maxClockSkewMs.',
    unit: '{reading}',
  });
  const gatesClosed = meter.createCounter('stage_deferral.gates.closed', {
    description: 'Resource gates closed by a capacity answer (one that was open, or whose window had ended).',
    unit: '{gate}',
  });
  const gatesOpened = meter.createCounter('stage_deferral.gates.opened', {
    description: 'Resource gates opened by a success or wakeDeferred({ resource }).',
    unit: '{gate}',
  });
  // the resources this process has seen (their lines are observed by the waiting gauge)
  const resources = new Set<string>();
  const latency = meter.createHistogram('stage_deferral.executor.duration', {
    description: 'How long the host executor took per dispatch attempt.',
    unit: 's',
    advice: { explicitBucketBoundaries: LATENCY_BUCKETS },
  });

  const listeners: { [E in EngineEventName]?: EngineListener<E> } = {
    dispatched: (e: EngineEvents['dispatched']) => {
      const attrs = { ...queue, [A.stage]: e.ref.stage, [A.outcome]: 'dispatched' };
      outcomes.add(1, attrs);
      latency.record(e.executorMs / 1000, attrs);
    },
    deferred: (e: EngineEvents['deferred']) => {
      const attrs = { ...queue, [A.stage]: e.ref.stage, [A.reason]: e.reason, [A.class]: e.class };
      outcomes.add(1, { ...attrs, [A.outcome]: 'deferred' });
      deferrals.add(1, attrs);
      latency.record(e.executorMs / 1000, { ...queue, [A.stage]: e.ref.stage, [A.outcome]: 'deferred' });
    },
    suppressed: (e: EngineEvents['suppressed']) => {
      const cls = classOfSuppression(e.reason);
      const attrs: Attributes = {
        ...queue,
        [A.stage]: e.ref.stage,
        [A.via]: e.via,
        ...(cls ? { [A.class]: cls } : {}),
      };
      suppressed.add(1, attrs);
      if (e.via === 'dispatch') outcomes.add(1, { ...attrs, [A.outcome]: 'suppressed', [A.reason]: e.reason });
    },
    failed: (e: EngineEvents['failed']) => {
      const errorType = e.error instanceof Error ? e.error.name : e.reason;
      const attrs = { ...queue, [A.stage]: e.ref.stage, [A.outcome]: 'failed' };
      outcomes.add(1, { ...attrs, [A.reason]: e.reason, [A.errorType]: errorType });
      latency.record(e.executorMs / 1000, attrs);
    },
    woken: (e: EngineEvents['woken']) => {
      wakeUps.add(1, { ...queue, [A.stage]: e.ref.stage, [A.early]: e.early === true });
    },
    cancelled: (e: EngineEvents['cancelled']) => {
      cancels.add(1, { ...queue, [A.stage]: e.ref.stage, [A.hadDeferral]: e.hadDeferral });
    },
    cleared: (e: EngineEvents['cleared']) => {
      clears.add(1, queue);
      cleared.add(e.count, queue);
    },
    releaseFailed: (e: EngineEvents['releaseFailed']) => {
      releaseFailures.add(1, { ...queue, [A.stage]: e.ref.stage });
    },
    resultInvalid: (e: EngineEvents['resultInvalid']) => {
      invalidResults.add(1, { ...queue, [A.stage]: e.ref.stage });
    },
    replicaLag: (e: EngineEvents['replicaLag']) => {
      replicaLags.add(e.writes, { ...queue, [A.op]: e.op });
    },
    clockSkew: () => clockSkews.add(1, queue),
    gateClosed: (e: EngineEvents['gateClosed']) => {
      resources.add(e.resource);
      gatesClosed.add(1, { ...queue, [A.resource]: e.resource });
    },
    gateOpened: (e: EngineEvents['gateOpened']) => {
      resources.add(e.resource);
      gatesOpened.add(1, { ...queue, [A.resource]: e.resource });
    },
  };
  for (const [name, listener] of Object.entries(listeners)) {
    engine.on(name as EngineEventName, listener as EngineListener<EngineEventName>);
  }

  let stopGauge = () => undefined as void;
  if (options.deferredGauge !== false) {
    // Cheap on purpose: BullMQ's delayed count, one ZCARD, O(1) however many
    // stages are deferred. Every deferred stage has exactly one delayed wake-up;
    // the few other delayed jobs are held back by BullMQ for a retry backoff or
    // an in-flight retry. An exact count (`listDeferred`) reads every stage.
    const gauge = meter.createObservableGauge('stage_deferral.stages.deferred', {
      description: 'Delayed jobs on the dispatch queue: one wake-up per deferred stage, plus retries held back.',
      unit: '{stage}',
    });
    const observe = async (result: ObservableResult) => {
      try {
        result.observe(await engine.queue.getDelayedCount(), queue);
      } catch {
        // Redis unreachable or the engine closed: no observation this time.
      }
    };
    gauge.addCallback(observe);
    // stages waiting in each resource's line (one ZCARD per resource this process saw a gate of)
    const waiting = meter.createObservableGauge('stage_deferral.resource.waiting', {
      description: 'Stages waiting in a resource’s line (per resource this process saw a gate of).',
      unit: '{stage}',
    });
    const observeLines = async (result: ObservableResult) => {
      try {
        const client = (await redisClient(engine.queue)) as unknown as { zcard(key: string): Promise<number> };
        for (const r of resources) {
          const n = await client.zcard(engine.queue.toKey(`sd:wq:@${encodeResource(r)}`));
          result.observe(n, { ...queue, [A.resource]: r });
        }
      } catch {
        // Redis unreachable or the engine closed: no observation this time.
      }
    };
    waiting.addCallback(observeLines);
    stopGauge = () => {
      gauge.removeCallback(observe);
      waiting.removeCallback(observeLines);
    };
  }

  return () => {
    for (const [name, listener] of Object.entries(listeners)) {
      engine.off(name as EngineEventName, listener as EngineListener<EngineEventName>);
    }
    stopGauge();
  };
}

function classOfSuppression(reason: string): 'capacity' | 'idempotent' | undefined {
  if (reason === 'deferred_capacity') return 'capacity';
  if (reason === 'deferred_idempotent') return 'idempotent';
  return undefined;
}
