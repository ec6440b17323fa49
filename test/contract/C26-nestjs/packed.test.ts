import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../helpers/build';
import { devDependencies, OFFLINE_FIRST, packedConsumer, redisUrl, TSC, type Consumer } from '../../helpers/pack';
import { client, closeClients, dropPrefix, isolated } from '../../helpers/redis';

/**
 * `bullmq-stage-deferral/nestjs` from the packed tarball, in a Nest app on
 * `@nestjs/bullmq`: its types under every module resolution a Nest app uses,
 * and the app itself, from CommonJS and ESM, on Nest 11 and 12.
 */
let consumer: Consumer;
beforeAll(async () => {
  const dev = devDependencies();
  consumer = await packedConsumer(
    'sd-nest-consumer',
    ['bullmq', 'ioredis', 'reflect-metadata', 'rxjs'].map((p) => `${p}@${dev[p]}`).concat(nest('devDependencies')),
  );
}, 240_000);
afterAll(() => consumer?.remove());

/** The packages of a Nest app on `@nestjs/bullmq`, at the dev dependencies' versions or at major 12. */
function nest(major: 'devDependencies' | '12'): string[] {
  const dev = devDependencies();
  return ['@nestjs/bullmq', '@nestjs/common', '@nestjs/core'].map((p) => `${p}@${major === '12' ? '12' : dev[p]}`);
}

/** A tiny Nest app as a user writes it: a @Processor host, a service injecting the queue and the engine. */
const APP = `import { BullModule, InjectQueue, OnWorkerEvent, Processor } from '@nestjs/bullmq';
import { Inject, Injectable, Module } from '@nestjs/common';
import type { Job, Queue } from 'bullmq';
import { dispatched, noCapacity, type DispatchContext, type DispatchEngine, type StageRef } from 'bullmq-stage-deferral';
import { InjectStageDeferral, StageDeferralModule, StageDispatchHost } from 'bullmq-stage-deferral/nestjs';

@Injectable()
export class Farm {
  free = 0;
}

@Processor('stage-dispatch', { concurrency: 2 })
export class RenderProcessor extends StageDispatchHost<{ n: number }> {
  constructor(@Inject(Farm) private readonly farm: Farm) {
    super();
  }
  async execute(_ref: StageRef, payload: { n: number }, ctx: DispatchContext) {
    ctx.signal.throwIfAborted();
    return this.farm.free > payload.n ? dispatched() : noCapacity();
  }
  @OnWorkerEvent('completed')
  completed(job: Job): string | undefined {
    return job.id;
  }
}

@Injectable()
export class Scenes {
  constructor(
    @InjectStageDeferral() readonly engine: DispatchEngine<{ n: number }>,
    @InjectQueue('stage-dispatch') readonly queue: Queue,
  ) {}
  render(ref: StageRef) {
    return this.engine.enqueue(ref, { n: 1 });
  }
}

@Module({
  imports: [
    BullModule.forRoot({ connection: { host: 'localhost' }, prefix: 'app' }),
    StageDeferralModule.registerQueue({ windows: { capacitySeconds: 5 }, outcomes: { capacity: ['farm_full'] } }),
  ],
  providers: [Farm, RenderProcessor, Scenes],
})
export class AppModule {}

// @ts-expect-error a window is a number of seconds: proves the declarations are read, not \`any\`
StageDeferralModule.registerQueue({ windows: { capacitySeconds: '5' } });
`;

/** The guide's NestJS example: the first ```ts block of its "## NestJS" section. */
function guideSnippet(): string {
  const guide = readFileSync(join(ROOT, 'docs', 'guide.md'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(guide.slice(guide.indexOf('\n## NestJS\n')));
  if (!block) throw new Error('docs/guide.md has no NestJS example');
  return block[1]!;
}

/** Each module resolution a Nest app may use, with the files it compiles. */
const RESOLUTIONS = {
  node10: { module: 'commonjs', moduleResolution: 'node10', files: ['app.ts'] },
  node16: { module: 'node16', moduleResolution: 'node16', files: ['app.ts', 'app-esm.mts'] },
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext', files: ['app.ts', 'app-esm.mts'] },
  bundler: { module: 'esnext', moduleResolution: 'bundler', files: ['app.ts'] },
} as const;

async function typeCheck(name: keyof typeof RESOLUTIONS, source = APP, esmOnly = false): Promise<void> {
  const { files: all, ...resolution } = RESOLUTIONS[name];
  // Nest 12 is ESM only: under node16 a CommonJS file may not import it (TypeScript's TS1479), whatever it imports
  const files = esmOnly && name === 'node16' ? ['app-esm.mts'] : all;
  for (const file of files) writeFileSync(join(consumer.dir, file), source);
  const base = { strict: true, noEmit: true, skipLibCheck: true, target: 'ES2022', types: ['node'] };
  writeFileSync(
    join(consumer.dir, `tsconfig.${name}.json`),
    JSON.stringify({ compilerOptions: { ...base, ...resolution, experimentalDecorators: true }, files }),
  );
  await consumer.sh(process.execPath, [TSC, '-p', `tsconfig.${name}.json`]);
}

/** The app from the packed subpath, as a script: one stage deferred, woken, dispatched; then `app.close()`. */
function script(flavour: 'cjs' | 'mjs', where: { prefix: string; queueName: string }): string {
  const load = (names: string, from: string) =>
    flavour === 'cjs' ? `const ${names} = require('${from}');` : `import ${names} from '${from}';`;
  return [
    flavour === 'cjs' ? "require('reflect-metadata');" : "import 'reflect-metadata';",
    load('assert', 'node:assert'),
    load('{ BullModule, Processor, getQueueToken }', '@nestjs/bullmq'),
    load('{ Module }', '@nestjs/common'),
    load('{ NestFactory }', '@nestjs/core'),
    load('{ InvalidOptionsError, noCapacity, dispatched }', 'bullmq-stage-deferral'),
    load('{ StageDeferralModule, StageDispatchHost, getStageDeferralToken }', 'bullmq-stage-deferral/nestjs'),
    flavour === 'cjs' ? '(async () => {' : '',
    // its errors are the main entry's classes: one engine, not a copy
    "assert.throws(() => StageDeferralModule.registerQueue({ name: '' }), (e) => e instanceof InvalidOptionsError);",
    'let calls = 0;',
    `class Host extends StageDispatchHost { async execute() { return calls++ === 0 ? noCapacity() : dispatched(); } }`,
    `Processor('${where.queueName}')(Host);`,
    'class AppModule {}',
    'Module({',
    `  imports: [BullModule.forRoot({ connection: new URL(${JSON.stringify(redisUrl())}), prefix: '${where.prefix}' }),`,
    `    StageDeferralModule.registerQueue({ name: '${where.queueName}', windows: { capacitySeconds: 0.2, jitter: 0 } })],`,
    '  providers: [Host],',
    '})(AppModule);',
    'const app = await NestFactory.createApplicationContext(AppModule, { logger: false });',
    `const engine = app.get(getStageDeferralToken('${where.queueName}'));`,
    `assert.strictEqual(engine.queue.name, app.get(getQueueToken('${where.queueName}')).name);`,
    "const sent = new Promise((resolve) => engine.once('dispatched', resolve));",
    "assert.strictEqual((await engine.enqueue({ scope: ['book-1'], stage: 'image' }, null)).added, true);",
    'await sent;',
    'await app.close();',
    `console.log('nest ${flavour} ok', calls);`,
    flavour === 'cjs' ? '})().catch((e) => { console.error(e); process.exit(1); });' : '',
  ].join('\n');
}

describe('C26: the packed nestjs subpath', () => {
  // 12 first: the tests after these run on the dev dependencies' Nest
  it.each(['12', 'devDependencies'] as const)(
    'on @nestjs/* %s: a Nest app on @nestjs/bullmq type-checks under node10, node16, nodenext and bundler, and runs from CJS and ESM: a deferral, its wake-up, app.close() and exit',
    async (major) => {
      await consumer.sh('npm', ['install', ...OFFLINE_FIRST, ...nest(major)]);
      for (const name of Object.keys(RESOLUTIONS) as (keyof typeof RESOLUTIONS)[])
        await typeCheck(name, APP, major === '12');
      for (const flavour of ['cjs', 'mjs'] as const) {
        const where = isolated();
        writeFileSync(join(consumer.dir, `nest.${flavour}`), script(flavour, where));
        try {
          // it exits by itself: app.close() closed the Worker, the engine and the queue
          const { stdout } = await consumer.sh(process.execPath, [`nest.${flavour}`]);
          expect(stdout.trim()).toBe(`nest ${flavour} ok 2`);
        } finally {
          await dropPrefix(client(), where.prefix);
          await closeClients();
        }
      }
    },
    300_000,
  );

  it("the guide's NestJS example type-checks as it stands, under node10 and nodenext", async () => {
    await typeCheck('node10', guideSnippet());
    await typeCheck('nodenext', guideSnippet());
  });

  it('a type error in the app fails the check under node10 (the subpath is not `any` there)', async () => {
    await expect(
      typeCheck(
        'node10',
        `import { StageDispatchHost } from 'bullmq-stage-deferral/nestjs';\nexport const n: number = StageDispatchHost;\n`,
      ),
    ).rejects.toThrow(/TS2322/);
  });
});
