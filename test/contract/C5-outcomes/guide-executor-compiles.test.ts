import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

/**
 * C5: the guide's "Write the executor" snippet, as a user pastes it, with a downstream whose
 * `error` is a string read off the wire (the guide: "'gpu_pool_full' defers"; `string` is the
 * type any HTTP or RPC client gives it). It must type-check against the package's types.
 */
/** The guide's first executor block, with the declarations a user's app has around it. */
const guide = readFileSync(path.join(__dirname, '../../../docs/guide.md'), 'utf8');
const section = guide.slice(guide.indexOf('## Write the executor'));
const block = section.slice(section.indexOf('```ts\n') + 6, section.indexOf('```\n', section.indexOf('```ts\n') + 6));
const snippet = `
import { Redis } from 'ioredis';
declare const renderFarm: {
  submit(ref: unknown, payload: unknown, o: { buildId?: string; fencingToken: number; signal: AbortSignal }): Promise<{
    status: number; retryAfterMs?: number; full: boolean; alreadyRendered: boolean; error?: string; jobs: number;
  }>;
};
const connection = new Redis({ lazyConnect: true });
${block.replace("from 'bullmq-stage-deferral'", "from '../../../src'")}
export { engine };
`;

describe('C5: the guide’s executor compiles', () => {
  it('C5: a reason read from the downstream’s answer (a string) type-checks as the guide writes it', () => {
    const file = path.join(__dirname, 'guide-executor.snippet.ts');
    const config = ts.readConfigFile(path.join(__dirname, '../../../tsconfig.json'), ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, path.join(__dirname, '../../..'));
    const host = ts.createCompilerHost({ ...options, noEmit: true });
    const read = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, ...rest) =>
      name === file ? ts.createSourceFile(name, snippet, lang) : read(name, lang, ...rest);
    const program = ts.createProgram([file], { ...options, noEmit: true }, host);
    const errors = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file?.fileName === file)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' ').slice(-110));
    expect(errors).toEqual([]);
  });
});
