import 'reflect-metadata';
import { BullModule, InjectQueue, Processor } from '@nestjs/bullmq';
import { Injectable, Module } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { dispatched } from '../../../src';
import { StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import { closeNest, nestRoot, place, tryStartNest } from '../../helpers/nest';

/**
 * The dispatch queue registered with StageDeferralModule and, by another module of the app, with
 * BullModule.registerQueue too (the guide says not to). With other options (a prefix of its own)
 * the start fails with InvalidOptionsError naming the second registration. (The same options
 * twice make a second Queue object on the same keys: nothing to refuse.) Real Redis.
 */
afterEach(closeNest);

@Processor('renders')
class Host extends StageDispatchHost {
  async execute() {
    return dispatched();
  }
}

function jobsModule(prefix?: string) {
  // another module's service, on the queue as that module registered it
  @Injectable()
  class Reports {
    constructor(@InjectQueue('renders') readonly queue: Queue) {}
  }
  @Module({
    imports: [BullModule.registerQueue({ name: 'renders', ...(prefix === undefined ? {} : { prefix }) })],
    providers: [Reports],
  })
  class ReportsModule {}
  return ReportsModule;
}

const twice = /renders.*registered.*(BullModule\.registerQueue|twice)|(BullModule\.registerQueue|twice).*renders/;

describe('C26: the dispatch queue registered with BullModule.registerQueue too', () => {
  it('C26: another prefix, imported after: the start fails with an error naming the second registration, not a prefix mismatch of attachWorker', async () => {
    const where = place();
    const other = place();
    const r = await tryStartNest(
      [nestRoot(where), StageDeferralModule.registerQueue({ name: 'renders' }), jobsModule(other.prefix)],
      [Host],
    );
    const outcome = 'error' in r ? r.error : 'started';
    expect(outcome).toMatch(/^InvalidOptionsError: /);
    expect(outcome).toMatch(twice);
  });
});
