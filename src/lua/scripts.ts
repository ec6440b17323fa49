/**
 * The engine's Lua scripts. Every key a script names is under the queue's
 * base `<prefix>:<queue>:`, so with a hash-tagged prefix they all hash to the
 * queue's slot (BullMQ's own scripts build job keys from the base the same way).
 *
 * Shared words: M = the stage's marker (value: the wake-up job id, TTL: the
 * window); L = the stage's in-flight lock (value: the token
 * `<job id>\n<fencing token>`, or `x` + token once cancelled); F = the queue's
 * fencing counter; D = BullMQ's deduplication key of the stage's enqueued job;
 * J = a job's BullMQ hash; IDX = the queue's licence index, a sorted set (all
 * scores 0) of members `<stageId>@<suffix>`, at most one per stage: a wake-up
 * id, or `<stageId>@j.<job id>` for a job whose id is not the engine's,
 * optionally marked `!` (a fresh chain: cleared, or retried by hand) or `?`
 * (its job failed for good). A wake-up job that is not the stage's licence
 * does nothing when it runs.
 *
 * Fields the engine keeps on a dispatch job's own hash (they go with the job):
 *   sdc  cancelled: the job must not dispatch when it (next) runs
 *   sds  superseded: the job recorded a deferral; its wake-up carries the stage
 *   sdf  failed for good: when it runs again, it was retried by hand (a fresh chain)
 *   sdb  BullMQ's `atm` when the job's chain began again (a retry by hand)
 *   sdx  real failures not counted in `atm` (retries the engine scheduled itself)
 */

/** Lua snippet: the licence members of stage `sid` in `idx`. */
const licences = (idx: string, sid: string) =>
  `redis.call('ZRANGEBYLEX', ${idx}, '[' .. ${sid} .. '@', '[' .. ${sid} .. '@\\255')`;

/** Lua helpers shared by the scripts that read licences and job hashes. */
const HELPERS = `
-- the job id of a licence member: its mark dropped, and the '@j.' form unwrapped
local function jobOf(lic)
  local last = string.sub(lic, -1)
  if last == '!' or last == '?' then lic = string.sub(lic, 1, -2) end
  local at = string.find(lic, '@', 1, true)
  if at and string.sub(lic, at + 1, at + 2) == 'j.' then return string.sub(lic, at + 3) end
  return lic
end
-- real failures a job has spent in its current chain
local function spent(J)
  local f = redis.call('HMGET', J, 'atm', 'sdb', 'sdx')
  return (tonumber(f[1]) or 0) - (tonumber(f[2]) or 0) + (tonumber(f[3]) or 0)
end
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * batch: the hot path. Runs, in order, the begin and release operations the
 * engine queued during one turn of the event loop (one command for many
 * attempts). KEYS: 1 IDX, 2 F, then per operation: begin -> M, L, J; release -> L
 * ARGV: 1 queue base, 2 number of operations, then per operation:
 *   'b', stageId, own job id ('' for a direct call), own licence member, lockMs,
 *        kind ('w' a wake-up, '' anything else), skew tolerance ms
 *   'r', stageId, token, '1' to revoke the stage's licence (chain ended)
 * Returns one reply per operation (see `begin` and `release`), then Redis' time in ms.
 */
export const BATCH = `
local IDX = KEYS[1]
local F = KEYS[2]
-- job hashes of licensed jobs are built from the queue base, as BullMQ builds its own (same slot)
local BASE = ARGV[1]
${HELPERS}
-- begin: decide whether a dispatch may run, and take the lock if so.
-- {1, marker, pttl} deferred | {2} in flight | {3} stale wake-up (not the licence)
-- {4} this job was cancelled | {5, pttl} a wake-up promoted early by a clock
-- ahead of Redis' (within the tolerance): wait out the rest | {6} superseded:
-- this job recorded a deferral, its wake-up carries the stage
-- {0, licence or '', fencing token, failures of this job, failures of the
--  licensed job (another one) in the chain, 1 when this attempt starts a fresh
--  chain (a job that failed for good, retried by hand)}: lock taken
local function begin(M, L, J, sid, own, me, lockMs, wake, tol)
  local m = redis.call('GET', M)
  if m then
    local p = redis.call('PTTL', M)
    if m ~= own then return {1, m, p} end
    -- its own marker: on time (a few ms early), early by a clock (re-delay), or promoted (wake now)
    if p > 20 and p <= tol then return {5, p} end
  end
  local retried = false
  if own ~= '' then
    local c = redis.call('HMGET', J, 'sdc', 'sds', 'sdf')
    if c[1] then return {4} end
    if c[2] then return {6} end
    retried = c[3] and true or false
  end
  local l = redis.call('GET', L)
  if l then
    local x = 'x' .. own .. '\\n'
    if own ~= '' and string.sub(l, 1, #x) == x then return {4} end
    return {2}
  end
  local lic = ${licences('IDX', 'sid')}[1]
  if wake == 'w' and not retried and lic ~= me and lic ~= me .. '!' and lic ~= me .. '?' then return {3} end
  local carried = 0
  if retried then
    -- a job that failed for good, retried by hand: its chain and its budget start again here
    redis.call('HSET', J, 'sdb', redis.call('HGET', J, 'atm') or 0, 'sdx', 0)
    redis.call('HDEL', J, 'sdf')
    if lic == me .. '?' then
      redis.call('ZREM', IDX, lic)
      redis.call('ZADD', IDX, 0, me .. '!')
    end
  elseif lic then
    local last = string.sub(lic, -1)
    -- the failures of another job that holds the stage's chain (a wake-up in its backoff) carry over
    if last ~= '?' and jobOf(lic) ~= own then carried = spent(BASE .. jobOf(lic)) end
  end
  if m then redis.call('DEL', M) end
  local fence = redis.call('INCR', F)
  redis.call('SET', L, own .. '\\n' .. fence, 'PX', lockMs)
  local mine = 0
  if own ~= '' then mine = spent(J) end
  return {0, lic or '', fence, mine, carried, retried and 1 or 0}
end

-- release: end an attempt that did not defer; on success also revoke the licence.
-- {cancelled 0|1, revoked licence...}
local function release(L, sid, token, revoke)
  local l = redis.call('GET', L)
  local cancelled = 0
  if l == 'x' .. token then cancelled = 1 end
  if l == token or cancelled == 1 then redis.call('DEL', L) end
  if revoke ~= '1' then return {cancelled} end
  local old = ${licences('IDX', 'sid')}
  for _, o in ipairs(old) do redis.call('ZREM', IDX, o) end
  return {cancelled, unpack(old)}
end

local out = {}
local k, a = 3, 3
local n = tonumber(ARGV[2])
for i = 1, n do
  if ARGV[a] == 'b' then
    out[i] = begin(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], tonumber(ARGV[a + 6]))
    k, a = k + 3, a + 7
  else
    out[i] = release(KEYS[k], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
    k, a = k + 1, a + 4
  end
end
out[n + 1] = nowMs()
return out
`;

/**
 * defer: record a deferral; runs in the same MULTI as the wake-up's add.
 * KEYS: 1 L, 2 M, 3 IDX, 4 the wake-up's log list, 5 D, 6 J (the deferring job's hash)
 * ARGV: 1 stageId, 2 token, 3 wake-up id, 4 the window's end (ms, Redis' clock),
 *       5 log line ('' for none), 6 the deferring job's id ('' for a direct call)
 * The marker expires at the window's end by Redis' clock, the same instant the
 * wake-up is due (its timestamp is Redis' time too), whatever the host's clock says.
 * The deferring job is marked superseded (`sds`) and, if `enqueue` added it,
 * gives up its deduplication key: if it is retried (it threw after this
 * transaction), its begin stops instead of dispatching the stage a second time.
 * A wake-up id is unique per deferral, so finding it already licensed means this
 * very transaction ran before (a client resent it after a failover): {1} again.
 * Returns {1, old licence...} recorded, lock released; the old licences are revoked
 *         {0, 1}                 cancelled while in flight: nothing recorded, lock released
 *         {0, 0}                 lock lost: nothing recorded
 */
export const DEFER = `
${HELPERS}
if redis.call('ZSCORE', KEYS[3], ARGV[3]) or redis.call('ZSCORE', KEYS[3], ARGV[3] .. '!') then return {1} end
local l = redis.call('GET', KEYS[1])
if l ~= ARGV[2] then
  if l == 'x' .. ARGV[2] then
    redis.call('DEL', KEYS[1])
    return {0, 1}
  end
  return {0, 0}
end
local old = ${licences('KEYS[3]', 'ARGV[1]')}
for _, o in ipairs(old) do redis.call('ZREM', KEYS[3], o) end
redis.call('ZADD', KEYS[3], 0, ARGV[3])
redis.call('SET', KEYS[2], ARGV[3], 'PX', math.max(1, tonumber(ARGV[4]) - nowMs()))
redis.call('DEL', KEYS[1])
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[4], ARGV[5]) end
local own = ARGV[6]
if own ~= '' then
  if redis.call('GET', KEYS[5]) == own then redis.call('DEL', KEYS[5]) end
  if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('HSET', KEYS[6], 'sds', 1) end
end
return {1, unpack(old)}
`;

/**
 * extend: renew the lock while the executor runs.
 * KEYS: 1 L   ARGV: 1 token, 2 lockMs
 * Returns 1 renewed, 2 renewed but cancelled (abort the executor), 0 lost
 */
export const EXTEND = `
local l = redis.call('GET', KEYS[1])
if l == ARGV[1] or l == 'x' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if l == ARGV[1] then return 1 end
  return 2
end
return 0
`;

/**
 * probe: what an enqueue would find (read only).
 * KEYS: 1 M, 2 L, 3 IDX   ARGV: 1 stageId
 * Returns {1, pttl} deferred, {2} in flight, {3, licence} a licensed job (its
 * state decides whether it is pending), {0} nothing
 */
export const PROBE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, redis.call('PTTL', KEYS[1])} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
local lic = ${licences('KEYS[3]', 'ARGV[1]')}[1]
if lic then return {3, lic} end
return {0}
`;

/**
 * cancel: end a stage's deferral and revoke its licence; mark an in-flight
 * dispatch cancelled; mark every job of the stage the engine knows of
 * (licensed, failed for good, pending through D) cancelled, so none of them
 * dispatches later, even if an operator retries it by hand.
 * KEYS: 1 M, 2 L, 3 IDX, 4 D
 * ARGV: 1 stageId, 2 queue base
 * Returns {had marker 0|1, in flight 0|1, pending job id or '', revoked licence...}
 */
export const CANCEL = `
${HELPERS}
local function mark(id)
  local J = ARGV[2] .. id
  if redis.call('EXISTS', J) == 1 then redis.call('HSET', J, 'sdc', 1) end
end
local had = redis.call('DEL', KEYS[1])
local old = ${licences('KEYS[3]', 'ARGV[1]')}
for _, o in ipairs(old) do
  redis.call('ZREM', KEYS[3], o)
  mark(jobOf(o))
end
local l = redis.call('GET', KEYS[2])
local inflight = 0
if l then
  inflight = 1
  if string.sub(l, 1, 1) ~= 'x' then redis.call('SET', KEYS[2], 'x' .. l, 'KEEPTTL') end
end
-- only a job the engine added for this stage (its id starts with the stage id)
local pending = redis.call('GET', KEYS[4])
if pending and string.sub(pending, 1, #ARGV[1] + 1) == ARGV[1] .. '@' then
  redis.call('DEL', KEYS[4])
  mark(pending)
else
  pending = nil
end
return {had, inflight, pending or '', unpack(old)}
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

/**
 * fail: a dispatch job failed for good. The job is marked `sdf` (a retry by
 * hand then starts a fresh chain and budget), and its licence member gets the
 * mark `?` (added if the stage had none, or only an older failure): nothing
 * of the stage counts as pending, and a cancel can still reach the job. A
 * stage licensed to another job keeps that licence.
 * KEYS: 1 IDX, 2 J   ARGV: 1 stageId, 2 the failed job's licence member
 */
export const FAIL = `
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HSET', KEYS[2], 'sdf', 1) end
local lic = ${licences('KEYS[1]', 'ARGV[1]')}[1]
if lic == nil or lic == ARGV[2] or lic == ARGV[2] .. '!' or string.sub(lic, -1) == '?' then
  if lic then redis.call('ZREM', KEYS[1], lic) end
  redis.call('ZADD', KEYS[1], 0, ARGV[2] .. '?')
end
return 1
`;

/**
 * retried: count a real failure the engine retries itself (BullMQ's own
 * attempts are used up, the chain's budget is not: a retry by hand).
 * KEYS: 1 J   Returns the new count.
 */
export const RETRIED = `return redis.call('HINCRBY', KEYS[1], 'sdx', 1)`;
