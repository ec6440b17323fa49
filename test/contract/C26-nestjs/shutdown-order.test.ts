import 'reflect-metadata';
import { OnWorkerEvent, Processor } from '@nestjs/bullmq';
import { Inject, Injectable, Module, type OnModuleDestroy } from '@nestjs/common';
import {
  EngineClosedError,
  type DispatchContext,
  type DispatchEngine,
  type ExecutorResult,
  type StageRef,
} from '../../../src';
import { InjectStageDeferral, StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import { latch } from '../../helpers/jobs';
import { closedByTest, closeNest, look, nestRoot, place, startNest } from '../../helpers/nest';
import { waitFor } from '../../helpers/redis';

/** app.close() with a dispatch running, in a real @nestjs/bullmq app on real Redis. */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

afterEach(closeNest);

/** What happened at shutdown, in order. */
const steps: string[] = [];

/** A downstream pool of its own module, closed by its `onModuleDestroy` (an HTTP agent, Prisma's `$disconnect`). */
@Injectable()
class Downstream implements OnModuleDestroy {
  readonly started = latch<DispatchContext>();
  send(ctx: DispatchContext): Promise<ExecutorResult> {
    this.started.open(ctx);
    // holds until the engine aborts the attempt
    return new Promise((_, reject) =>
      ctx.signal.addEventListener('abort', () => {
        steps.push('executor aborted');
        reject(ctx.signal.reason as Error);
      }),
    );
  }
  onModuleDestroy() {
    steps.push('downstream closed');
  }
}

@Module({ providers: [Downstream], exports: [Downstream] })
class DownstreamModule {}

@Processor('renders')
class HoldingProcessor extends StageDispatchHost {
  constructor(@Inject(Downstream) private readonly downstream: Downstream) {
    super();
  }
  execute(_ref: StageRef, _payload: unknown, ctx: DispatchContext) {
    return this.downstream.send(ctx);
  }
  @OnWorkerEvent('closing')
  onClosing() {
    steps.push('worker closing');
  }
  @OnWorkerEvent('closed')
  onClosed() {
    steps.push('worker closed');
  }
}

@Injectable()
class Producer {
  constructor(@InjectStageDeferral('renders') readonly engine: DispatchEngine) {}
}

describe('C26: shutdown order', () => {
  it('app.close() stops the Worker taking jobs, then aborts the running executor before its dependencies close: the job ends delayed, no attempt spent; then the engine closes', async () => {
    steps.length = 0;
    const where = place();
    const app = await startNest(
      [
        nestRoot(where),
        DownstreamModule,
        StageDeferralModule.registerQueue({ name: 'renders', retry: { attempts: 1 } }),
      ],
      [HoldingProcessor, Producer],
    );
    const engine = app.get(Producer).engine;
    const { jobId } = await engine.enqueue(image, {});
    const ctx = await app.get(Downstream).started.opened;
    const queue = look({ prefix: where.prefix, queueName: 'renders' });

    await app.close();
    closedByTest(app);
    expect(ctx.signal.reason).toBeInstanceOf(EngineClosedError);
    expect(steps.slice(0, 3)).toEqual(['worker closing', 'executor aborted', 'worker closed']);
    expect(steps.indexOf('downstream closed')).toBeGreaterThan(steps.indexOf('executor aborted'));
    // nothing lost: the job waits, delayed, for the next worker, its one attempt unspent
    expect(await queue.getJobState(jobId!)).toBe('delayed');
    expect((await queue.getJob(jobId!))?.attemptsMade).toBe(0);
    expect(await queue.getWorkersCount()).toBe(0);
    await expect(engine.enqueue(image, {})).rejects.toThrow(EngineClosedError);
  });

  it('a second app.close() resolves too; a producer-only app (no host) closes its engine', async () => {
    const where = place();
    const app = await startNest([nestRoot(where), StageDeferralModule.registerQueue({ name: 'renders' })], [Producer]);
    const engine = app.get(Producer).engine;
    expect(await engine.enqueue(image, {})).toMatchObject({ added: true });
    await Promise.all([app.close(), app.close()]);
    closedByTest(app);
    await expect(engine.enqueue(image, {})).rejects.toThrow(EngineClosedError);
    await waitFor(
      async () => (await look({ prefix: where.prefix, queueName: 'renders' }).getWorkersCount()) === 0,
      'no Worker',
    );
  });
});
