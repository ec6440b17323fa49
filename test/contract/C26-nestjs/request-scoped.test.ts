import 'reflect-metadata';
import { Processor } from '@nestjs/bullmq';
import { Inject, Injectable, Scope } from '@nestjs/common';
import { dispatched, type DispatchEngine, type StageRef } from '../../../src';
import { getStageDeferralToken, StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import { closeNest, look, nestRoot, place, startNest } from '../../helpers/nest';
import { waitFor } from '../../helpers/redis';

/** A host whose dependency is request-scoped: @nestjs/bullmq makes one host per job (its own instance). */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

afterEach(closeNest);

const sent: string[] = [];

/** A per-job provider (a tenant context, a request-scoped logger): it makes the host per-job too. */
@Injectable({ scope: Scope.REQUEST })
class JobContext {
  readonly id = Math.random().toString(36).slice(2);
}

@Processor('renders')
class ScopedProcessor extends StageDispatchHost {
  constructor(@Inject(JobContext) private readonly context: JobContext) {
    super();
  }
  async execute(ref: StageRef) {
    sent.push(`${ref.stage}:${typeof this.context.id}`);
    return dispatched();
  }
}

describe('C26: a host with a request-scoped dependency', () => {
  it('C26: a host made per job by @nestjs/bullmq still runs its execute: the job completes, dispatched', async () => {
    sent.length = 0;
    const where = place();
    const app = await startNest(
      [
        nestRoot(where),
        StageDeferralModule.registerQueue({ name: 'renders', retry: { attempts: 1 }, removeOnComplete: false }),
      ],
      [JobContext, ScopedProcessor],
    );
    const engine = app.get<DispatchEngine>(getStageDeferralToken('renders'));
    const { jobId } = await engine.enqueue(image, {});
    const queue = look({ prefix: where.prefix, queueName: 'renders' });
    const state = await waitFor(async () => {
      const s = await queue.getJobState(jobId!);
      return s === 'completed' || s === 'failed' ? s : undefined;
    }, 'the dispatch job finished');
    const job = await queue.getJob(jobId!);
    expect({ state, failedReason: job?.failedReason, sent }).toEqual({
      state: 'completed',
      failedReason: undefined,
      sent: ['image:string'],
    });
  });
});
