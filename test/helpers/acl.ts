import { randomUUID } from 'node:crypto';
import type IORedis from 'ioredis';
import { redisOptions } from './redis';

/**
 * The ACL documented in docs/reliability.md ("Least privilege"): keys under
 * the prefix only, no pub/sub channels, and these command categories/commands.
 */
export const ACL_RULES = (prefix: string) => [
  'resetkeys',
  `~${prefix}:*`,
  'resetchannels',
  '-@all',
  '+@read',
  '+@write',
  '+@scripting',
  '+@transaction',
  '+time', // the engine decides windows on Redis' clock
  '+info', // ioredis' ready check and BullMQ's Redis version check
  '+client|setname', // BullMQ names its connections (Queue.getWorkers); optional
];

const made: string[] = [];

/**
 * Makes a Redis user `<tag>-<random>` with `admin` (a client of the test
 * Redis' default user): a password, ACL_RULES(prefix), then `extra` (a
 * `-command` takes one away, a `+command` adds one). Resolves the options to
 * connect as it. `dropAclUsers` deletes it.
 */
export async function aclUser(
  admin: IORedis,
  tag: string,
  prefix: string,
  extra: readonly string[] = [],
): Promise<{ host: string; port: number; username: string; password: string }> {
  const user = `${tag}-${randomUUID().slice(0, 8)}`;
  const password = randomUUID();
  await admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${password}`, ...ACL_RULES(prefix), ...extra);
  made.push(user);
  return { ...redisOptions(), username: user, password };
}

/** Deletes every user `aclUser` made (in this test file) and not deleted yet. */
export async function dropAclUsers(admin: IORedis): Promise<void> {
  for (const user of made.splice(0)) await admin.call('ACL', 'DELUSER', user);
}
