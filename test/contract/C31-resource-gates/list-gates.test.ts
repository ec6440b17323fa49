import { createDispatchEngine, dispatched, InvalidResourceError, noCapacity, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { redisNow } from '../../helpers/observe';
import { deadPort, isolated } from '../../helpers/redis';

/** `listGates`: each resource's gate (open, closed until, probing) and how many stages wait in its line. */
const stage = (n: number): StageRef => ({ scope: ['book-l', `sc-${n}`], stage: 'image' });

describe('C31: listGates reads each resource gate and its line', () => {
  it('a closed gate with its window end and its line; a probe in flight; an open gate while its line holds a woken stage; none once that is done', async () => {
    const h = harness({
      resourceOf: (ref) => (ref.scope[1] === 'sc-9' ? 'farm' : 'gpu pool'),
      windows: { capacitySeconds: 30, capacityMaxSeconds: 600, jitter: 0 },
    });
    expect(await h.engine.listGates()).toEqual([]);
    h.executor.script(stage(1), noCapacity());
    await h.engine.dispatchStage(stage(1), {});
    await h.engine.dispatchStage(stage(2), {});
    const now = await redisNow(h.redis);
    const [gpu] = await h.engine.listGates();
    expect(gpu).toEqual({ resource: 'gpu pool', gate: 'closed', until: expect.any(Number), waiting: 2 });
    // the capacity window, on Redis' clock
    expect(gpu!.until! - now).toBeGreaterThan(25_000);
    expect(gpu!.until! - now).toBeLessThanOrEqual(30_000);

    // 'farm': a probe in flight (its lease set as a begin sets it), nothing waiting
    const farmGate = `${h.prefix}:${h.queueName}:sd:gate:farm`;
    await h.redis.set(farmGate, `p${now + 60_000}`);
    expect(await h.engine.listGates(['farm', 'gpu pool', 'tpu'])).toEqual([
      { resource: 'farm', gate: 'probing', until: now + 60_000, waiting: 0 },
      { resource: 'gpu pool', gate: 'closed', until: gpu!.until, waiting: 2 },
    ]);

    // while it probes, another stage that needs the farm waits in its line
    expect(await h.engine.dispatchStage(stage(9), {})).toMatchObject({ reason: 'gate_closed' });
    expect(await h.engine.listGates(['farm'])).toEqual([
      { resource: 'farm', gate: 'probing', until: now + 60_000, waiting: 1 },
    ]);
    // a wake opens the gate; the woken stage stays in the line until it is done
    await h.engine.wakeDeferred({ resource: 'farm', limit: 1 });
    expect(await h.engine.listGates(['farm'])).toEqual([{ resource: 'farm', gate: 'open', until: null, waiting: 1 }]);
    h.executor.script(stage(9), dispatched(1));
    expect(await h.engine.dispatchStage(stage(9), {})).toMatchObject({ dispatched: true });
    expect(await h.redis.exists(farmGate)).toBe(0);
    expect(await h.engine.listGates(['farm'])).toEqual([]);
    expect(await h.engine.listGates()).toEqual([
      { resource: 'gpu pool', gate: 'closed', until: gpu!.until, waiting: 2 },
    ]);
  });

  it('an array with a hole is InvalidResourceError (a hole is no name, not skipped), and so is one of holes alone', async () => {
    const h = harness();
    await h.redis.set(`${h.prefix}:${h.queueName}:sd:gate:gpu`, '1');
    const hole = Object.assign(new Array<string>(2), { 1: 'gpu' });
    await expect(h.engine.listGates(hole)).rejects.toBeInstanceOf(InvalidResourceError);
    await expect(h.engine.listGates(new Array<string>(3))).rejects.toBeInstanceOf(InvalidResourceError);
    // the same names, dense: read
    expect(await h.engine.listGates(['gpu'])).toEqual([{ resource: 'gpu', gate: 'closed', until: 1, waiting: 0 }]);
  });

  it('keys set by hand: a gate value that is no time has ended (as a begin reads it), an odd key name shows as it is; a name given twice, one row', async () => {
    const h = harness();
    const base = `${h.prefix}:${h.queueName}:`;
    await h.redis.set(`${base}sd:gate:gpu`, 'garbage');
    await h.redis.set(`${base}sd:gate:tpu`, 'pxyz');
    await h.redis.set(`${base}sd:gate:%E0%A4%A`, '5');
    expect(await h.engine.listGates()).toEqual([
      { resource: '%E0%A4%A', gate: 'closed', until: 5, waiting: 0 },
      { resource: 'gpu', gate: 'closed', until: 0, waiting: 0 },
      { resource: 'tpu', gate: 'probing', until: 0, waiting: 0 },
    ]);
    expect(await h.engine.listGates(['gpu', 'gpu'])).toEqual([
      { resource: 'gpu', gate: 'closed', until: 0, waiting: 0 },
    ]);
  });

  it('with no names: every resource SCAN finds among many keys, in name order, of this queue only (its name read as text, not a pattern)', async () => {
    const { prefix, queueName } = isolated();
    // a queue whose name, read as a glob, matches not its own keys but the other queue's
    const h = harness({}, { prefix, queueName: `a[b]${queueName}` });
    const other = harness({}, { prefix, queueName: `ab${queueName}` });
    const base = `${prefix}:a[b]${queueName}:`;
    const fill = h.redis.pipeline();
    // more keys than one SCAN call reads, so every call of the walk counts
    for (let i = 0; i < 5000; i++) fill.set(`${base}filler:${i}`, '1');
    const names = Array.from({ length: 20 }, (_, i) => `r-${String(i).padStart(2, '0')}`);
    for (const n of names) fill.set(`${base}sd:gate:${n}`, '7');
    // one resource with a line and no gate
    fill.zadd(`${base}sd:wq:@line-only`, 1, 'book/s/image');
    fill.set(`${prefix}:ab${queueName}:sd:gate:elsewhere`, '7');
    await fill.exec();
    expect((await h.engine.listGates()).map((g) => g.resource)).toEqual(['line-only', ...names]);
    expect((await other.engine.listGates()).map((g) => g.resource)).toEqual(['elsewhere']);
  });

  it.each([
    ['an empty name', ['gpu', '']],
    ['a name that is no string', [7]],
    ['no array', 'gpu'],
  ])('%s is InvalidResourceError, before any read (here: of a Redis that never answers)', async (_name, names) => {
    const engine = createDispatchEngine({ connection: { host: '127.0.0.1', port: await deadPort() }, ...isolated() });
    engine.queue.on('error', () => undefined); // ECONNREFUSED, each reconnect
    try {
      // a read first would wait for the connection that never comes
      const error = await engine.listGates(names as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidResourceError);
      expect((error as Error).message).toMatch(/listGates/);
    } finally {
      type Inner = { backend: { connection: { _client?: { disconnect(): void } } } };
      (engine.queue as unknown as Inner).backend.connection._client?.disconnect();
      await engine.close();
    }
  });
});
