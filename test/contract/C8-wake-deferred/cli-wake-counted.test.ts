import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { instrumentEngine, type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { cliInProcess as cli, TestReader, wakeupsOf } from '../../helpers/metrics';
import { waitFor } from '../../helpers/redis';

/**
 * `woken` is reported by the process that woke the stage. The ops CLI's `wake` prints its own
 * count; the fleet's worker that runs the promoted wake-up reports nothing of a wake made
 * elsewhere (no `woken`, no `stage_deferral.wakeups`).
 */
const a: StageRef = { scope: ['r34-cli', 'ch-1'], stage: 'image' };

describe('C8: an operator wakes a stage with the CLI', () => {
  it('`wake` from the CLI prints its count; the fleet that runs the woken wake-up reports no woken of it', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    const stop = instrumentEngine(h.engine, { meter: provider.getMeter('r34'), deferredGauge: false });
    const woken: unknown[] = [];
    h.engine.on('woken', (e) => woken.push(e));
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
      expect({ woken, wakeups: (await wakeupsOf(reader)).total }).toEqual({ woken: [], wakeups: 0 });
    } finally {
      stop();
      await provider.shutdown();
    }
  });
});
