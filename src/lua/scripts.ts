/**
 * The engine's Lua scripts. Every key a script touches is in KEYS; with a
 * hash-tagged prefix they all hash to the queue's slot.
 *
 * Shared words: M = the stage's marker (value: the wake-up job id, TTL: the
 * window); L = the stage's in-flight lock (value: a token, or `x` + token once
 * cancelled); IDX = the queue's licence index, a sorted set (all scores 0) of
 * wake-up job ids `<stageId>@<suffix>`, at most one per stage, optionally
 * ending in `!` (cleared: the chain starts fresh). A wake-up job that is not
 * the stage's licence does nothing when it runs.
 */

/** Lua snippet: the licence members of stage ARGV[1] in IDX (KEYS[idx]). */
const licences = (idx: string) =>
  `redis.call('ZRANGEBYLEX', ${idx}, '[' .. ARGV[1] .. '@', '[' .. ARGV[1] .. '@\\255')`;

/**
 * begin: decide whether a dispatch may run, and take the lock if so.
 * KEYS: 1 M, 2 L, 3 IDX
 * ARGV: 1 stageId, 2 token, 3 lockMs, 4 own job id ('' for a direct call), 5 '1' if a wake-up
 * Returns {1, markerValue, pttl} deferred (no write)
 *         {2}                    in flight (no write)
 *         {3}                    stale wake-up: not the licence (no write)
 *         {0, licence or ''}     lock taken; own early marker removed
 */
export const BEGIN = `
local m = redis.call('GET', KEYS[1])
if m and m ~= ARGV[4] then return {1, m, redis.call('PTTL', KEYS[1])} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
local lic = ${licences('KEYS[3]')}[1]
if ARGV[5] == '1' and lic ~= ARGV[4] and lic ~= ARGV[4] .. '!' then return {3} end
if m then redis.call('DEL', KEYS[1]) end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {0, lic or ''}
`;

/**
 * defer: record a deferral; runs in the same MULTI as the wake-up's add.
 * KEYS: 1 L, 2 M, 3 IDX, 4 the wake-up's log list
 * ARGV: 1 stageId, 2 token, 3 wake-up id, 4 window ms, 5 log line ('' for none)
 * Wake-up ids are unique, so finding ARGV[3] already licensed means this is a
 * replay of a transaction that already ran (ioredis resends unanswered
 * commands after a reconnect): it answers "recorded" and changes nothing.
 * Returns {1, old licence...} recorded, lock released; the old licences are revoked
 *         {0, 1}                 cancelled while in flight: nothing recorded, lock released
 *         {0, 0}                 lock lost: nothing recorded
 */
export const DEFER = `
if redis.call('ZSCORE', KEYS[3], ARGV[3]) or redis.call('ZSCORE', KEYS[3], ARGV[3] .. '!') then return {1} end
local l = redis.call('GET', KEYS[1])
if l ~= ARGV[2] then
  if l == 'x' .. ARGV[2] then
    redis.call('DEL', KEYS[1])
    return {0, 1}
  end
  return {0, 0}
end
local old = ${licences('KEYS[3]')}
for _, o in ipairs(old) do redis.call('ZREM', KEYS[3], o) end
redis.call('ZADD', KEYS[3], 0, ARGV[3])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
redis.call('DEL', KEYS[1])
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[4], ARGV[5]) end
return {1, unpack(old)}
`;

/**
 * release: end a dispatch that did not defer.
 * KEYS: 1 L, 2 IDX
 * ARGV: 1 stageId, 2 token, 3 '1' to revoke the stage's licence (chain ended)
 * Returns {cancelled 0|1, revoked licence...}
 */
export const RELEASE = `
local l = redis.call('GET', KEYS[1])
local cancelled = 0
if l == 'x' .. ARGV[2] then cancelled = 1 end
if l == ARGV[2] or cancelled == 1 then redis.call('DEL', KEYS[1]) end
if ARGV[3] ~= '1' then return {cancelled} end
local old = ${licences('KEYS[2]')}
for _, o in ipairs(old) do redis.call('ZREM', KEYS[2], o) end
return {cancelled, unpack(old)}
`;

/**
 * extend: renew the lock while the executor runs.
 * KEYS: 1 L   ARGV: 1 token, 2 lockMs
 * Returns 1 renewed, 0 lost
 */
export const EXTEND = `
local l = redis.call('GET', KEYS[1])
if l == ARGV[1] or l == 'x' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

/**
 * probe: what an enqueue would find (read only).
 * KEYS: 1 M, 2 L, 3 IDX   ARGV: 1 stageId
 * Returns {1, pttl} deferred, {2} in flight, {3, licence} a wake-up pending, {0} nothing
 */
export const PROBE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, redis.call('PTTL', KEYS[1])} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
local lic = ${licences('KEYS[3]')}[1]
if lic then return {3, lic} end
return {0}
`;

/**
 * cancel: end a stage's deferral and revoke its wake-up; mark an in-flight dispatch cancelled.
 * KEYS: 1 M, 2 L, 3 IDX, 4 the stage's BullMQ deduplication key (its pending job)
 * ARGV: 1 stageId
 * Returns {had marker 0|1, in flight 0|1, pending job id or '', revoked licence...}
 */
export const CANCEL = `
local had = redis.call('DEL', KEYS[1])
local old = ${licences('KEYS[3]')}
for _, o in ipairs(old) do redis.call('ZREM', KEYS[3], o) end
local l = redis.call('GET', KEYS[2])
local inflight = 0
if l then
  inflight = 1
  if string.sub(l, 1, 1) ~= 'x' then redis.call('SET', KEYS[2], 'x' .. l, 'KEEPTTL') end
end
return {had, inflight, redis.call('GET', KEYS[4]) or '', unpack(old)}
`;

/**
 * clear: end the deferrals of the given licences (one batch of a scope).
 * KEYS: 1 IDX, then per licence i: 2i M, 2i+1 the wake-up's job hash
 * ARGV: the licences, in the same order
 * Returns the wake-up ids whose deferral was ended (their licence now ends in '!').
 * A licence whose marker and job are both gone is dropped from IDX.
 */
export const CLEAR = `
local cleared = {}
for i, lic in ipairs(ARGV) do
  local m = KEYS[2 * i]
  local id = lic
  if string.sub(lic, -1) == '!' then id = string.sub(lic, 1, -2) end
  if redis.call('GET', m) == id then
    redis.call('DEL', m)
    if id == lic then
      redis.call('ZREM', KEYS[1], lic)
      redis.call('ZADD', KEYS[1], 0, id .. '!')
    end
    cleared[#cleared + 1] = id
  elseif redis.call('EXISTS', KEYS[2 * i + 1]) == 0 then
    redis.call('ZREM', KEYS[1], lic)
  end
end
return cleared
`;
