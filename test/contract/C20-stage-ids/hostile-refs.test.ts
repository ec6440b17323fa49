import { Queue } from 'bullmq';
import fc from 'fast-check';
import { InvalidStageRefError } from '../../../src/errors';
import { FRESH_CHAIN, readyJobId, wakeUpJobId } from '../../../src/job-data';
import { parseStageId, stageId } from '../../../src/stage-ref';
import type { StageRef } from '../../../src/types';
import { harness } from '../../helpers/engine';
import { isolated, keysUnder, redisOptions } from '../../helpers/redis';
import { envInt, seedFor } from '../../reliability/harness';

/** Segments built to break encodings: separators, braces, `%`, emoji, lone surrogates, digits, very long. */
const nasty = fc.constantFrom(
  '/',
  '@',
  ':',
  '::',
  '{',
  '}',
  '{app}',
  '%',
  '%2F',
  '%25',
  '|',
  '!',
  '.',
  '0',
  '123',
  ' ',
  '\u0000',
  '😀',
  '👩‍👩‍👧',
  '\uD800',
  '\uDFFF',
  'é',
  'é',
);
const segment = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constant('') },
  {
    weight: 3,
    arbitrary: fc
      .array(fc.oneof(nasty, fc.string({ minLength: 1, maxLength: 3 })), { minLength: 1, maxLength: 6 })
      .map((a) => a.join('')),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 100, maxLength: 600 }) },
);
const refArb: fc.Arbitrary<StageRef> = fc.record({
  scope: fc.array(segment, { minLength: 0, maxLength: 9 }),
  stage: segment,
});

function tryId(ref: StageRef): string | InvalidStageRefError {
  try {
    return stageId(ref);
  } catch (e) {
    if (e instanceof InvalidStageRefError) return e;
    throw e;
  }
}

const runs = () => envInt('HOSTILE_RUNS', 200, 5000);

describe('C20: hostile stage refs', () => {
  it('the stage id encoding is injective (it round-trips) or the ref is rejected with InvalidStageRefError', () => {
    const seed = seedFor('hostile-injective');
    fc.assert(
      fc.property(refArb, refArb, (a, b) => {
        const ia = tryId(a);
        const ib = tryId(b);
        if (typeof ia === 'string') expect(parseStageId(ia)).toEqual({ scope: a.scope, stage: a.stage });
        if (typeof ia === 'string' && typeof ib === 'string') {
          const same = JSON.stringify(a) === JSON.stringify(b);
          expect(ia === ib).toBe(same);
        }
      }),
      { seed, numRuns: runs() * 5 },
    );
  });

  it('every job id the engine builds is accepted by BullMQ as given (a real add), and rejected refs write nothing', async () => {
    const seed = seedFor('hostile-job-ids');
    const { prefix, queueName } = isolated();
    const queue = new Queue(queueName, { connection: redisOptions() as never, prefix });
    const { engine, redis } = harness({ windows: undefined }, { prefix, queueName: `${queueName}-e` });
    let accepted = 0;
    let rejected = 0;
    // BullMQ writes the queue's `meta` key when a Queue starts: let that happen first
    await queue.waitUntilReady();
    await engine.queue.waitUntilReady();
    const written = async () => (await keysUnder(redis, prefix)).filter((k) => !k.endsWith(':meta')).length;
    try {
      await fc.assert(
        fc.asyncProperty(refArb, fc.nat({ max: 1000 }), async (ref, n) => {
          const sid = tryId(ref);
          if (typeof sid !== 'string') {
            rejected += 1;
            const before = await written();
            await expect(engine.enqueue(ref, {})).rejects.toBeInstanceOf(InvalidStageRefError);
            await expect(engine.dispatchStage(ref, {})).rejects.toBeInstanceOf(InvalidStageRefError);
            await expect(engine.cancelActiveDispatch(ref)).rejects.toBeInstanceOf(InvalidStageRefError);
            expect(await written()).toBe(before);
            return;
          }
          accepted += 1;
          const ids = [
            wakeUpJobId(sid, 'capacity', { ...FRESH_CHAIN, capacity: n }, Date.now() + n),
            wakeUpJobId(sid, 'idempotent', { capacity: n, idempotent: 1, failures: n % 3 }, Date.now()),
            readyJobId(sid),
          ];
          for (const id of ids) {
            const job = await queue.add('x', {}, { jobId: id, delay: 60_000 });
            expect(job.id).toBe(id);
            expect((await queue.getJob(id))?.id).toBe(id);
          }
          // and the engine's own enqueue of that ref adds exactly its ready job
          const res = await engine.enqueue(ref, {});
          expect(res.added).toBe(true);
          expect(res.jobId?.startsWith(`${sid}@r.`)).toBe(true);
        }),
        { seed, numRuns: runs() },
      );
      console.log(
        `[reliability] hostile-job-ids: ${accepted} refs accepted (3 job ids each added to BullMQ), ${rejected} rejected before any write`,
      );
      expect(accepted).toBeGreaterThan(0);
      expect(rejected).toBeGreaterThan(0);
    } finally {
      await queue.close();
    }
  }, 300_000);

  it('scope prefixes given to clear and list are validated the same way', async () => {
    const { engine, redis, prefix } = harness({ windows: undefined });
    await fc.assert(
      fc.asyncProperty(fc.array(segment, { maxLength: 10 }), async (scope) => {
        let valid = true;
        try {
          stageId({ scope, stage: 's' });
        } catch {
          valid = false;
        }
        if (valid) {
          expect(await engine.clearDeferrals(scope)).toBe(0);
          expect(await engine.listDeferred(scope)).toEqual([]);
        } else {
          await expect(engine.clearDeferrals(scope)).rejects.toBeInstanceOf(InvalidStageRefError);
        }
      }),
      { seed: seedFor('hostile-scopes'), numRuns: runs() },
    );
    // nothing but BullMQ's queue metadata (written when the Queue starts)
    expect((await keysUnder(redis, prefix)).filter((k) => !k.endsWith(':meta'))).toEqual([]);
  }, 120_000);
});
