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
