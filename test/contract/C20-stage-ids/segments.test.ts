import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { addProducerJob } from '../../helpers/producer-job';
import { probe } from '../../helpers/visible';

/** Segments on the edges of encodeURIComponent / cjson; the job's data as BullMQ writes it, and \u-escaped (Python's json.dumps). */
const crash = new Error('executor crashed');
const asciiOnly = (json: string) =>
  json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

const cases: [string, string[], string][] = [
  ['marks', ["!'()*~-_."], 'image'],
  ['percent', ['%', '%41', '%%2'], '%25'],
  ['latin', ['é', 'ü'], 'ß'],
  ['astral', ['😀'], '𝄞'],
  ['nul and controls', ['\u0000', 'a\nb\t\u0001\u001f\u007f'], 'x'],
  ['line separators', ['\u2028', '\u2029'], '\ufeff'],
  ['max length', ['😀'.repeat(30), 'a'.repeat(140)], 'b'],
];

describe.each([
  ['as BullMQ writes it', false],
  ['\\u-escaped', true],
])('C20: data %s', (_, escaped) => {
  it.each(cases)(
    "%s: an enqueue (and the published probe) while the producer's job waits out its retry answers pending, a cancel removes it",
    async (_n, scope, stage) => {
      const ref = { scope, stage };
      const h = harness();
      const base = `${h.prefix}:${h.queueName}:`;
      h.executor.script(ref, crash);
      const { id } = await addProducerJob(h.engine.queue, ref, {
        attempts: 3,
        backoff: { type: 'fixed', delay: 60_000 },
      });
      const w = watch(h.engine.createWorker());
      await waitFor(() => w.failed.length === 1, 'the job failed');
      expect(await h.engine.queue.getJobState(id!)).toBe('delayed');
      // the job's data rewritten in the same published shape, as a producer in another language writes it
      if (escaped) await h.redis.hset(`${base}${id}`, 'data', asciiOnly((await h.redis.hget(`${base}${id}`, 'data'))!));
      expect(await probe(h, ref)).toEqual({ kind: 'pending', jobId: id });
      expect(await h.engine.enqueue(ref, {})).toMatchObject({ added: false, reason: 'pending', jobId: id });
      // the same scope with another stage kind is another stage
      expect(await h.engine.enqueue({ scope, stage: `${stage}-other` }, {})).toMatchObject({ added: true });
      // a cancel reaches the job
      expect(await h.engine.cancelActiveDispatch(ref)).toMatchObject({ removedJobs: 1 });
      expect(await h.engine.queue.getJob(id!)).toBeUndefined();
    },
  );
});
