import type { Command } from 'ioredis';
import { harness } from '../../helpers/engine';
import { connect } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** An engine on a client of the test's own, and the names of the commands it sent from `start()`. */
function counted(overrides: Parameters<typeof harness>[0] = {}) {
  const connection = connect({ maxRetriesPerRequest: null });
  const names: string[] = [];
  let counting = false;
  const send = connection.sendCommand.bind(connection);
  connection.sendCommand = ((command: Command, ...rest: unknown[]) => {
    if (counting) names.push(command.name.toLowerCase());
    return (send as (...a: unknown[]) => unknown)(command, ...rest);
  }) as typeof connection.sendCommand;
  const h = harness({ connection, ...overrides });
  return { h, names, start: () => (counting = true) };
}

describe('C27: what an enqueue asks of Redis', () => {
  it('C27: without waitForReplicas an enqueue reads its stage with the probe alone: no CLIENT INFO', async () => {
    const { h, names, start } = counted();
    await h.engine.isStageDeferred(image); // the engine's client started (its permission check)
    start();
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    expect(names).toContain('evalsha');
    expect(names).not.toContain('client');
  });

  it('C27: with waitForReplicas the probe also reads CLIENT INFO (the connection its WAIT is checked against)', async () => {
    const { h, names, start } = counted({ waitForReplicas: { replicas: 1, timeoutMs: 10 } });
    await h.engine.isStageDeferred(image);
    start();
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    expect(names).toContain('client');
  });
});
