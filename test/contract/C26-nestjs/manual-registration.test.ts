import 'reflect-metadata';
import { BullModule, BullRegistrar, Processor } from '@nestjs/bullmq';
import { dispatched, type DispatchEngine, type StageRef } from '../../../src';
import { getStageDeferralToken, StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import type { TestingModule } from '@nestjs/testing';
import { closeNest, look, place, tryStartNest } from '../../helpers/nest';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * `BullModule.forRoot({ extraOptions: { manualRegistration: true } })`: @nestjs/bullmq makes no
 * Worker until the app calls `BullRegistrar.register()` (a process that runs workers only when
 * configured to, or later). Real Redis.
 */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

afterEach(closeNest);

const sent: string[] = [];

@Processor('renders')
class RenderProcessor extends StageDispatchHost {
  async execute(ref: StageRef) {
    sent.push(ref.stage);
    return dispatched();
  }
}

const manualRoot = (prefix: string) =>
  BullModule.forRoot({ connection: redisOptions(), prefix, extraOptions: { manualRegistration: true } });

describe('C26: manualRegistration', () => {
  it('C26: the app starts before BullRegistrar.register(); after it, the host dispatches', async () => {
    sent.length = 0;
    const where = place();
    const started = await tryStartNest(
      [manualRoot(where.prefix), StageDeferralModule.registerQueue({ name: 'renders' })],
      [RenderProcessor],
    );
    expect(started).not.toHaveProperty('error');
    const { app } = started as { app: TestingModule };
    app.get(BullRegistrar).register();
    const engine = app.get<DispatchEngine>(getStageDeferralToken('renders'));
    await engine.enqueue(image, {});
    await waitFor(() => sent.length === 1, 'the host dispatched');
    expect(await look({ prefix: where.prefix, queueName: 'renders' }).getWorkersCount()).toBe(1);
  });
});
