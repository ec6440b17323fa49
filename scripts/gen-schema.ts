/**
 * Publishes the dispatch job data's zod schema (src/job-data.ts) as JSON
 * Schema: schema/dispatch-job-data.v<N>.json (`npm run schema`). The file is
 * checked in and shipped (`npm run schema` then formats it with prettier); test/contract/C19-producer-contract/job-data-schema.test.ts fails when it and the
 * zod schema drift.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { dispatchJobDataSchema, JOB_DATA_VERSION } from '../src/job-data';

export const SCHEMA_FILE = resolve(__dirname, `../schema/dispatch-job-data.v${JOB_DATA_VERSION}.json`);

/** The JSON Schema: what a worker accepts (`io: 'input'`: keys it does not name are ignored). */
export function jsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(dispatchJobDataSchema, { io: 'input' });
  const id = `https://github.com/bullmq-stage-deferral/bullmq-stage-deferral/blob/main/schema/dispatch-job-data.v${JOB_DATA_VERSION}.json`;
  return { $schema: schema.$schema, $id: id, ...schema };
}

if (require.main === module) {
  // `npm run schema` then lays it out with prettier; the test compares the parsed JSON
  writeFileSync(SCHEMA_FILE, `${JSON.stringify(jsonSchema(), null, 2)}\n`);
  console.log(`wrote ${SCHEMA_FILE}`);
}
