import { readFileSync } from 'node:fs';
import { jsonSchema, SCHEMA_FILE } from '../../../scripts/gen-schema';
import { dispatchJobData, JOB_DATA_VERSION, parseJobData } from '../../../src/job-data';
import { InvalidJobDataError, UnsupportedJobVersionError } from '../../../src';

/** the dispatch job data, published as JSON Schema for producers in any language. */
describe('C19: the JSON Schema of the dispatch job data', () => {
  const published = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as {
    properties: Record<string, unknown>;
    required: string[];
  };

  it('the checked-in schema/dispatch-job-data.v1.json is what `npm run schema` makes of the zod schema', () => {
    expect(SCHEMA_FILE).toMatch(new RegExp(`dispatch-job-data\\.v${JOB_DATA_VERSION}\\.json$`));
    expect(published).toEqual(jsonSchema());
  });

  it('names every field the engine writes, and requires what a producer must write', () => {
    const wakeUp = dispatchJobData({ scope: ['a'], stage: 's' }, null, 'b-1', {
      reason: 'r',
      class: 'capacity',
      deferrals: 1,
      resource: 'gpu',
    });
    expect(Object.keys(published.properties).sort()).toEqual(Object.keys(wakeUp).sort());
    expect(published.required.sort()).toEqual(['payload', 'scope', 'stage', 'v']);
    expect(published).toMatchObject({ properties: { v: { const: JOB_DATA_VERSION } } });
  });

  it('a job of another wire format version fails with UnsupportedJobVersionError (INVALID_JOB_DATA), saying what to do', () => {
    const data = { v: 2, scope: ['a'], stage: 's', payload: null };
    let error: unknown;
    try {
      parseJobData(data, 'j-9');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UnsupportedJobVersionError);
    expect(error).toBeInstanceOf(InvalidJobDataError);
    expect(error).toMatchObject({
      code: 'INVALID_JOB_DATA',
      version: 2,
      jobId: 'j-9',
      message:
        'Dispatch job j-9 is in wire format v2; this worker reads v1 only. Upgrade the workers before the producers, ' +
        'then retry the job (docs/producers.md, "Versioning")',
    });
    // not a version: malformed data, as before
    for (const v of [0, '2', 1.5]) {
      expect(() => parseJobData({ ...data, v }, 'j')).toThrow(/^Malformed dispatch job j: Expected `v`/);
    }
    // no `v` at all (or no object, null too): a job of a plain queue.add, told how a dispatch job is added
    for (const plain of [{ ...data, v: undefined }, null, 'render book-1'])
      expect(() => parseJobData(plain, 'j')).toThrow(
        'Malformed dispatch job j: it was not added by the dispatch contract: add dispatch jobs with ' +
          '`engine.enqueue(ref, payload)` (or, from another language, as docs/producers.md says); Expected',
      );
  });
});
