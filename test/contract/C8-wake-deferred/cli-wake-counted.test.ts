import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { instrumentEngine, type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { cliInProcess as cli, TestReader, wakeupsOf } from '../../helpers/metrics';
import { waitFor } from '../../helpers/redis';

/**
 * README, "Wake on capacity": "Ops: `npx bullmq-stage-deferral wake [scope…] --stage
 * image --limit 5`; event `woken` with `early: true`; metric `stage_deferral.wakeups` with
 * `stage_deferral.early`"; docs/observability.md: `stage_deferral.wakeups` counts "stages woken,
 * once per wake". Commit 2e03d06 moved the count of an early wake to the process that called
 * `wakeDeferred` and silenced the wake-up's run (WAKE marks it `sdw`, begin returns it,
 * `locked` emits nothing). When the caller is the ops CLI, that process is a short-lived engine
 * no one instruments (and cannot: `src/cli/session.ts` makes it and closes it): it emits its
 * `woken` to nobody and exits, and the fleet's worker, instrumented, runs the promoted wake-up
 * without a word. An operator's `wake` is counted zero times anywhere (before 2e03d06 the worker
 * counted it, as early false). The same holds for any Worker-less producer engine that calls
 * `wakeDeferred` without `instrumentEngine` of its own (an API process).
 */
const a: StageRef = { scope: ['r34-cli', 'ch-1'], stage: 'image' };

describe('C8: an operator wakes a stage with the CLI', () => {
  it('`wake` from the CLI is counted in stage_deferral.wakeups by the instrumented fleet', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    const stop = instrumentEngine(h.engine, { meter: provider.getMeter('r34'), deferredGauge: false });
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT);
      await h.engine.dispatchStage(a, {});
      const r = await cli(h, '--json', 'wake', '--stage', 'image');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ woken: [a] });
      const dispatched: unknown[] = [];
      h.engine.on('dispatched', (e) => dispatched.push(e.ref));
      const worker = h.engine.createWorker();
      try {
        await waitFor(() => dispatched.length === 1, 'the woken wake-up to dispatch');
      } finally {
        await worker.close();
      }
      // one wake: counted once, by the only instrumented engine there is
      expect((await wakeupsOf(reader)).total).toBe(1);
    } finally {
      stop();
      await provider.shutdown();
    }
  });
});
