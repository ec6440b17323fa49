import 'reflect-metadata';
import { getQueueToken, InjectQueue, OnWorkerEvent, Processor } from '@nestjs/bullmq';
import { Inject, Injectable } from '@nestjs/common';
import type { Job, Queue } from 'bullmq';
import { CapacityError, dispatched, type DispatchEngine, type DispatchResult, type StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { InjectStageDeferral, StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import { closeNest, nestRoot, place, startNest } from '../../helpers/nest';
import { waitFor } from '../../helpers/redis';

/** A NestJS app on `@nestjs/bullmq`: BullModule's config, the user's @Processor, real Redis. */
const image: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };
type Scene = { sceneUrl: string };

afterEach(closeNest);

/** The downstream, a provider of its own: a render farm with `free` slots. */
@Injectable()
class RenderFarm {
  free = 0;
  readonly sent: string[] = [];
  submit(sceneUrl: string): boolean {
    if (this.free === 0) return false;
    this.free -= 1;
    this.sent.push(sceneUrl);
    return true;
  }
}

/** A service of the app: the queue as `@nestjs/bullmq` injects it, and the engine on it. */
@Injectable()
class ScenesService {
  constructor(
    @InjectQueue('renders') readonly queue: Queue,
    @InjectStageDeferral('renders') readonly engine: DispatchEngine<Scene>,
  ) {}
  render(ref: StageRef, sceneUrl: string) {
    return this.engine.enqueue(ref, { sceneUrl });
  }
}

/** The user's processor: the executor is its own method, its dependency injected as usual. */
@Processor('renders')
class RenderProcessor extends StageDispatchHost<Scene> {
  readonly completed: { stage: string; result: DispatchResult }[] = [];
  constructor(@Inject(RenderFarm) private readonly farm: RenderFarm) {
    super();
  }
  async execute(_ref: StageRef, payload: Scene) {
    if (!this.farm.submit(payload.sceneUrl)) throw new CapacityError({ reason: 'farm_full' });
    return dispatched();
  }
  @OnWorkerEvent('completed')
  onCompleted(job: Job<{ stage: string }>, result: DispatchResult) {
    this.completed.push({ stage: job.data.stage, result });
  }
}

async function renderApp(extra: { windows?: { capacitySeconds: number; jitter: number } } = {}) {
  const where = place();
  const app = await startNest(
    [
      nestRoot(where),
      StageDeferralModule.registerQueue({
        name: 'renders',
        outcomes: { capacity: ['farm_full'] },
        windows: { capacitySeconds: 0.3, jitter: 0 },
        ...extra,
      }),
    ],
    [RenderFarm, RenderProcessor, ScenesService],
  );
  return { app, where, farm: app.get(RenderFarm), host: app.get(RenderProcessor), scenes: app.get(ScenesService) };
}

describe('C26: NestJS on @nestjs/bullmq', () => {
  it("a capacity answer of the @Processor's execute defers the stage; its wake-up runs on the same Worker and dispatches", async () => {
    // (a window of 10 min: the stage is still deferred when the test reads it, however slow the
    // machine; wakeDeferred then ends it, instead of waiting for it)
    const { farm, scenes } = await renderApp({ windows: { capacitySeconds: 600, jitter: 0 } });
    const deferred = new Promise((resolve) => scenes.engine.once('deferred', resolve));
    expect(await scenes.render(image, 's3://7')).toMatchObject({ added: true });
    expect(await deferred).toMatchObject({ ref: image, reason: 'farm_full', class: 'capacity' });
    expect(await scenes.engine.isStageDeferred(image)).toBe(true);
    expect(await scenes.render(image, 's3://7')).toMatchObject({ added: false, reason: 'deferred' });

    farm.free = 1;
    expect((await scenes.engine.wakeDeferred()).woken).toEqual([image]);
    await waitFor(() => farm.sent.length === 1, 'the wake-up dispatched the stage');
    expect(farm.sent).toEqual(['s3://7']);
    // one Worker on the queue: the one @nestjs/bullmq made for the @Processor
    expect(await scenes.queue.getWorkersCount()).toBe(1);
  });

  it('@InjectQueue resolves the dispatch queue: the engine is on it (name, prefix, Redis client), and a job added by engine.enqueue is one of its jobs', async () => {
    const { app, where, scenes } = await renderApp();
    expect(app.get(getQueueToken('renders'))).toBe(scenes.queue);
    expect(scenes.engine.queue.name).toBe('renders');
    expect(scenes.engine.queue.opts.prefix).toBe(where.prefix);
    expect(scenes.queue.opts.prefix).toBe(where.prefix);
    // no connection of its own: the engine talks to Redis on the queue's client
    expect(await redisClient(scenes.engine.queue)).toBe(await redisClient(scenes.queue));
    const r = await scenes.render(image, 's3://7');
    expect((await scenes.queue.getJob(r.jobId!))?.data).toMatchObject({ scope: image.scope, stage: 'image' });
  });

  it("@OnWorkerEvent('completed') on the host sees the dispatch job complete with its DispatchResult", async () => {
    const { farm, host, scenes } = await renderApp();
    farm.free = 1;
    await scenes.render(image, 's3://7');
    await waitFor(() => host.completed.length === 1, 'the completed event');
    expect(host.completed).toEqual([{ stage: 'image', result: expect.objectContaining({ dispatched: true }) }]);
    expect(host.engine).toBe(scenes.engine);
  });
});
