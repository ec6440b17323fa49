/**
 * Bull Board on the dispatch queue while a small render farm runs.
 *
 *   npm run demo:board            # then open http://localhost:3000
 *   PORT=8080 npm run demo:board
 *   (REDIS_URL, QUEUE and PREFIX choose where; defaults: local Redis, `stage-dispatch`, `bull`)
 *
 * The farm has 2 image slots and 1 video slot; each dispatched stage holds its
 * slot for a few seconds. Stages that find no free slot are deferred for
 * capacity: open the queue's "Delayed" tab to see their wake-up jobs (named
 * after the stage kind, data with the reason, class, deferrals and `until`,
 * "will run at" the window's end, one log line per deferral). A scheduler
 * tick every 5 s enqueues every pending stage again; for a deferred stage that
 * is a read-only no-op.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import express from 'express';
import IORedis from 'ioredis';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDispatchEngine, type DispatchEngine, type ExecutorResult, type StageRef } from '../src';

export interface BoardDemoOptions {
  /** An ioredis client; not closed by the demo. */
  connection: IORedis;
  prefix?: string;
  queueName?: string;
  /** 0 picks a free port. Default 3000. */
  port?: number;
  /** Capacity window, seconds. Default 20. */
  capacitySeconds?: number;
  /** How long a dispatched stage holds its slot, ms. Default 4000..9000 at random. */
  renderMs?: () => number;
  /** Scheduler tick, ms. Default 5000. */
  tickMs?: number;
  /** Start a new book when one is done. Default true. */
  loop?: boolean;
  log?: (line: string) => void;
}

export interface BoardDemo {
  url: string;
  engine: DispatchEngine<{ book: number }>;
  stats: { dispatched: number; deferred: number; suppressedTicks: number; done: number };
  close(): Promise<void>;
}

const SLOTS: Record<string, number> = { image: 2, video: 1 };

function bookStages(book: number): StageRef[] {
  const refs: StageRef[] = [];
  for (let ch = 1; ch <= 2; ch++) {
    for (let sc = 1; sc <= 3; sc++) {
      for (const stage of ['image', 'video']) refs.push({ scope: [`book-${book}`, `ch-${ch}`, `sc-${sc}`], stage });
    }
  }
  return refs;
}

const key = (ref: StageRef) => `${ref.scope.join('/')}:${ref.stage}`;

export async function startBoardDemo(options: BoardDemoOptions): Promise<BoardDemo> {
  const log = options.log ?? (() => undefined);
  const renderMs = options.renderMs ?? (() => 4000 + Math.floor(Math.random() * 5000));
  const busy: Record<string, number> = { image: 0, video: 0 };
  const timers = new Set<NodeJS.Timeout>();
  const stats = { dispatched: 0, deferred: 0, suppressedTicks: 0, done: 0 };
  const pending = new Map<string, StageRef>();
  let book = 1;

  // The host's executor: sends a stage to the farm if a slot of its kind is free.
  const executor = async (ref: StageRef): Promise<ExecutorResult> => {
    if (ref.stage === 'video' && ref.scope[1] === 'ch-2' && ref.scope[2] === 'sc-3') {
      return { dispatched: false, jobs: 0, reason: 'already_completed' };
    }
    if ((busy[ref.stage] ?? 0) >= (SLOTS[ref.stage] ?? 0)) {
      return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    }
    busy[ref.stage] = (busy[ref.stage] ?? 0) + 1;
    const t = setTimeout(() => {
      timers.delete(t);
      busy[ref.stage] = (busy[ref.stage] ?? 1) - 1;
    }, renderMs());
    timers.add(t);
    return { dispatched: true, jobs: 1, reason: null };
  };

  const engine = createDispatchEngine<{ book: number }>({
    connection: options.connection,
    prefix: options.prefix,
    queueName: options.queueName ?? 'stage-dispatch',
    windows: { capacitySeconds: options.capacitySeconds ?? 20, idempotentSeconds: 60 },
    // the board's Logs tab shows one line per deferral
    jobLog: true,
    executor,
    journal: async (ref, event) => {
      stats.deferred++;
      log(`deferred ${key(ref)} #${event.deferrals} (${event.class}: ${event.reason})`);
    },
  });
  const worker = engine.createWorker({ concurrency: 4 });
  worker.on('completed', (job, result: { dispatched?: boolean; completed?: boolean }) => {
    if (!result?.dispatched && !result?.completed) return;
    const ref = { scope: (job.data as { scope: string[] }).scope, stage: job.name };
    if (result.dispatched) stats.dispatched++;
    stats.done++;
    pending.delete(key(ref));
    log(`${result.dispatched ? 'dispatched' : 'already done'} ${key(ref)}`);
  });

  const startBook = async () => {
    for (const ref of bookStages(book)) {
      pending.set(key(ref), ref);
      await engine.enqueue(ref, { book });
    }
  };
  await startBook();

  // The scheduler: every tick enqueues every pending stage; deferred ones are suppressed.
  let ticking = false;
  const tick = setInterval(async () => {
    if (ticking) return;
    ticking = true;
    try {
      if (pending.size === 0 && options.loop !== false) {
        book++;
        await startBook();
        return;
      }
      for (const ref of pending.values()) {
        const r = await engine.enqueue(ref, { book });
        if (r.reason === 'deferred') stats.suppressedTicks++;
      }
    } catch (error) {
      log(`tick failed: ${(error as Error).message}`);
    } finally {
      ticking = false;
    }
  }, options.tickMs ?? 5000);

  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/');
  createBullBoard({
    queues: [new BullMQAdapter(engine.queue, { readOnlyMode: false })],
    serverAdapter,
    options: { uiConfig: { boardTitle: 'stage deferral' } },
  });
  const app = express();
  app.use('/', serverAdapter.getRouter());
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(options.port ?? 3000, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)));
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    engine,
    stats,
    async close() {
      clearInterval(tick);
      for (const t of timers) clearTimeout(t);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await engine.close();
    },
  };
}

if (require.main === module) {
  const connection = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  const queueName = process.env.QUEUE ?? 'stage-dispatch';
  const prefix = process.env.PREFIX ?? 'bull';
  const port = Number(process.env.PORT ?? 3000);
  startBoardDemo({ connection, port, queueName, prefix, log: (l) => console.log(l) }).then(
    (demo) => {
      console.log(`Bull Board: ${demo.url}/queue/${queueName}?status=delayed  (Ctrl-C to stop)`);
      const report = setInterval(() => {
        const s = demo.stats;
        console.log(
          `dispatched ${s.dispatched}, deferred ${s.deferred}, suppressed ticks ${s.suppressedTicks}, done ${s.done}`,
        );
      }, 10_000);
      const stop = async () => {
        clearInterval(report);
        await demo.close();
        await connection.quit();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (error) => {
      console.error(error);
      process.exitCode = 1;
      connection.disconnect();
    },
  );
}
