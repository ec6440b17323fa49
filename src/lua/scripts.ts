/**
 * The engine's Lua scripts. Every key a script touches is in KEYS; with a
 * hash-tagged prefix they all hash to the queue's slot.
 *
 * Shared words: M = the stage's marker (value: the wake-up job id, TTL: the
 * window); L = the stage's in-flight lock (value: a token, or `x` + token once
 * cancelled); D = BullMQ's deduplication key of the stage's enqueued job (its
 * value names that job while it is pending); IDX = the queue's licence index, a sorted set (all scores 0) of
 * wake-up job ids `<stageId>@<suffix>`, at most one per stage, optionally
 * ending in `!` (cleared: the chain starts fresh) or `?` (its job failed for
 * good; a retry by hand may run it). A wake-up job that is not the stage's
 * licence does nothing when it runs.
 */

/** Lua snippet: the licence members of stage `sid` (default ARGV[1]) in IDX (KEYS[idx]). */
const licences = (idx: string, sid = 'ARGV[1]') =>
  `redis.call('ZRANGEBYLEX', ${idx}, '[' .. ${sid} .. '@', '[' .. ${sid} .. '@\\255')`;

/**
 * batch: the hot path. Runs, in order, the begin and release operations the
 * engine queued during one turn of the event loop (one command for many
 * attempts, and a success's release rides along with the next begin).
 * KEYS: 1 IDX, then per operation: begin -> M, L, D; release -> L
 * ARGV: 1 number of operations, then per operation:
 *   'b', stageId, token, lockMs, own job id ('' for a direct call), kind: 'w' wake-up, 'r' enqueued, '' other
 *   'r', stageId, token, '1' to revoke the stage's licence (chain ended)
 * Returns one reply per operation, see `begin` and `release` below.
 */
export const BATCH = `
local IDX = KEYS[1]

-- begin: decide whether a dispatch may run, and take the lock if so.
-- Tokens are '<own job id>\\n<random>': a lock whose token starts with the
-- running job's own id was left by an earlier attempt of this very job, which
-- BullMQ only redelivers once that attempt's worker is gone; it is taken over.
-- {1, marker, pttl} deferred | {2} in flight | {3} stale wake-up (not the licence)
-- {4} this job was cancelled: in flight in an earlier attempt (lock deleted), or,
--     for a job enqueued by the engine ('r'), after a worker took it but before
--     this begin (the stage's deduplication key D no longer names it)
-- {0, licence or ''} lock taken; the wake-up's own early marker removed
local function begin(M, L, D, sid, token, lockMs, own, wake)
  local m = redis.call('GET', M)
  if m and m ~= own then return {1, m, redis.call('PTTL', M)} end
  if wake == 'r' and redis.call('GET', D) ~= own then return {4} end
  local l = redis.call('GET', L)
  if l then
    local mine = own .. '\\n'
    if own == '' then return {2} end
    if string.sub(l, 1, #mine + 1) == 'x' .. mine then
      redis.call('DEL', L)
      return {4}
    end
    if string.sub(l, 1, #mine) ~= mine then return {2} end
  end
  local lic = ${licences('IDX', 'sid')}[1]
  if wake == 'w' and lic ~= own and lic ~= own .. '!' and lic ~= own .. '?' then return {3} end
  if m then redis.call('DEL', M) end
  redis.call('SET', L, token, 'PX', lockMs)
  return {0, lic or ''}
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
local k, a = 2, 2
for i = 1, tonumber(ARGV[1]) do
  if ARGV[a] == 'b' then
    out[i] = begin(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
    k, a = k + 3, a + 6
  else
    out[i] = release(KEYS[k], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
    k, a = k + 1, a + 4
  end
end
return out
`;

/**
 * defer: record a deferral; runs in the same MULTI as the wake-up's add.
 * KEYS: 1 L, 2 M, 3 IDX, 4 the wake-up's log list, 5 D (the stage's deduplication key)
 * ARGV: 1 stageId, 2 token, 3 wake-up id, 4 window ms, 5 log line ('' for none)
 * An enqueued job that defers gives up its deduplication key here, not when it
 * completes: the wake-up carries the stage now, so if this job is retried (it
 * threw after this transaction, e.g. the replicas did not confirm it), its
 * begin finds the key no longer names it and it stops instead of dispatching
 * the stage a second time.
 * A wake-up id is unique per deferral, so finding it already licensed means this
 * very transaction ran before (a client resent it after a failover): {1} again,
 * instead of "lock lost", which would remove the wake-up it had added.
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
local own = string.match(ARGV[2], '^(.-)\\n')
if own and own ~= '' and redis.call('GET', KEYS[5]) == own then redis.call('DEL', KEYS[5]) end
return {1, unpack(old)}
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
if lic and string.sub(lic, -1) ~= '?' then return {3, lic} end
return {0}
`;

/**
 * cancel: end a stage's deferral and revoke its wake-up; mark an in-flight dispatch cancelled.
 * KEYS: 1 M, 2 L, 3 IDX, 4 D
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
local pending = redis.call('GET', KEYS[4])
-- a pending job a worker already took, but whose begin has not run yet, can be
-- neither removed nor marked through the lock: its begin finds that the stage's
-- deduplication key no longer names it, and stops
if pending then redis.call('DEL', KEYS[4]) end
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
 * fail: the wake-up's job failed for good; its licence gets the mark `?`, so
 * nothing of the stage counts as pending and a retry by hand may still run it.
 * KEYS: 1 IDX   ARGV: 1 stageId, 2 the failed job's id
 */
export const FAIL = `
for _, lic in ipairs(${licences('KEYS[1]')}) do
  if lic == ARGV[2] or lic == ARGV[2] .. '!' then
    redis.call('ZREM', KEYS[1], lic)
    redis.call('ZADD', KEYS[1], 0, ARGV[2] .. '?')
  end
end
return 1
`;
