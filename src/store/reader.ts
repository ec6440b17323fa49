import { timeMs } from './clock';

/** One Redis command: its name, then its arguments. */
export type Cmd = readonly [string, ...(string | number)[]];

/**
 * What the listing and the CLI's reads need from Redis: run some commands as one pipeline and
 * return their replies (the first error is thrown). Small on purpose, so a
 * test can count every command and every reply byte.
 */
export interface Reader {
  run(commands: readonly Cmd[]): Promise<unknown[]>;
}

interface Pipelines {
  pipeline(commands: unknown[][]): { exec(): Promise<[Error | null, unknown][] | null> };
}

/**
 * Redis' time, ms since the epoch: what a view measures a deferral's time left against (its
 * `until` is on Redis' clock; the machine a view runs on may keep another).
 */
export async function redisTime(reader: Reader): Promise<number> {
  const [time] = (await reader.run([['time']])) as [[string, string]];
  return timeMs(time);
}

/** A Reader over an ioredis client or Cluster (all keys of a queue share its hash tag). */
export function ioReader(redis: Pipelines): Reader {
  return {
    async run(commands) {
      if (commands.length === 0) return [];
      const replies = (await redis.pipeline(commands.map((c) => [...c])).exec()) ?? [];
      return replies.map(([error, value]) => {
        if (error) throw error;
        return value;
      });
    },
  };
}

/** The keys of one queue, BullMQ's and the engine's (see docs/design.md). */
export { StoreKeys as QueueKeys } from './keys';

/**
 * Reads a few fields of each job's data in Redis, so the payload never leaves
 * the server: per job key `{0}` (no job) or `{1, shape, reason, class,
 * deferrals, [scope, stage] as JSON, resource}`; shape is 1 when the data is a dispatch
 * job's (`v: 1`, `scope` an array, `stage` a string).
 */
const FIELDS = `
local out = {}
for i, key in ipairs(KEYS) do
  local d = redis.call('HGET', key, 'data')
  if not d then
    out[i] = {0}
  else
    local ok, t = pcall(cjson.decode, d)
    if ok and type(t) == 'table' then
      local shape = (t.v == 1 and type(t.scope) == 'table' and type(t.stage) == 'string') and 1 or 0
      local ref = ''
      if shape == 1 then
        local okr, r = pcall(cjson.encode, {t.scope, t.stage})
        if okr then ref = r end
      end
      local function s(v) if type(v) == 'string' then return v end return '' end
      local n = ''
      if type(t.deferrals) == 'number' then n = tostring(t.deferrals) end
      out[i] = {1, shape, s(t.reason), s(t.class), n, ref, s(t.resource)}
    else
      out[i] = {1, 0}
    end
  end
end
return out
`;

export interface JobFields {
  /** The data is a dispatch job's. */
  dispatch: boolean;
  reason?: string;
  class?: string;
  deferrals?: number;
  /** `[scope, stage]` from the data, when it is a dispatch job's. */
  ref?: [unknown, unknown];
  /** The resource a wake-up's stage waits for. */
  resource?: string;
}

export function fieldsCommand(jobKeys: readonly string[]): Cmd {
  return ['eval', FIELDS, jobKeys.length, ...jobKeys];
}

export function parseFields(reply: unknown): JobFields[] {
  return (reply as unknown[][]).map((r) => {
    // (the first element says whether the job exists: nothing reads it, a job that does not has no fields)
    const [, shape, reason, cls, deferrals, ref, resource] = r as [
      number,
      number?,
      string?,
      string?,
      string?,
      string?,
      string?,
    ];
    const text = (v: string | undefined) => (v ? v : undefined);
    let parsed: [unknown, unknown] | undefined;
    try {
      parsed = ref ? (JSON.parse(ref) as [unknown, unknown]) : undefined;
    } catch {
      parsed = undefined;
    }
    return {
      dispatch: shape === 1,
      ...(text(reason) && { reason }),
      // Stryker disable next-line ObjectLiteral: equivalent: the views read class from the wake-up's id (its licence), which dispatch.ts writes from the same class as the data's
      ...(text(cls) && { class: cls }),
      // Stryker disable next-line ObjectLiteral: equivalent: the views read the count from the wake-up's id (its chain), which dispatch.ts writes from the same count as the data's
      ...(text(deferrals) && { deferrals: Number(deferrals) }),
      ...(parsed && { ref: parsed }),
      ...(text(resource) && { resource }),
    };
  });
}

/** The job fields of each key, `chunk` keys per script call so Redis is never blocked for long. */
export async function readFields(reader: Reader, jobKeys: readonly string[], chunk = 50): Promise<JobFields[]> {
  const commands: Cmd[] = [];
  for (let i = 0; i < jobKeys.length; i += chunk) commands.push(fieldsCommand(jobKeys.slice(i, i + chunk)));
  return (await reader.run(commands)).flatMap(parseFields);
}
