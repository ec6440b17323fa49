/**
 * The engine's Lua scripts. Every key a script names is under the queue's
 * base `<prefix>:<queue>:`, so with a hash-tagged prefix they all hash to the
 * queue's slot (BullMQ's own scripts build job keys from the base the same way).
 *
 * Shared words: M = the stage's marker (value: the wake-up job id, TTL: the
 * window); L = the stage's in-flight lock (value: the token
 * `<job id>\n<fencing token>`, or `<job id>\n<fencing token>\n<BullMQ lock token>`
 * for a job's attempt (see `tiedTo`), or a newline + token once
 * cancelled (no token starts with a newline but a direct call's, `\n<fence>`, which
 * has no second one: `unmark`); live while its key exists); F = the queue's
 * fencing counter; D = BullMQ's deduplication key of the stage's enqueued job;
 * J = a job's BullMQ hash; IDX = the queue's licence index, a sorted set (all
 * scores 0) of job ids (every dispatch job's id starts `<stageId>@`): the job
 * that carries the stage (its licence: a wake-up, or a job waiting out a
 * retry), at most one per stage, optionally marked `!` (a fresh chain:
 * cleared, or retried by hand); and any number of records of jobs that failed
 * for good, marked `?` (a cancel reaches them; a retry by hand of one of them
 * runs). A job runs only as its stage's licence holder or when the stage has
 * none (a wake-up only as its holder); a job whose licence another attempt
 * revoked is marked superseded.
 *
 * Fields the engine keeps on a dispatch job's own hash (they go with the job):
 *   sdc  cancelled: the job must not dispatch when it (next) runs
 *   sds  superseded: the job recorded a deferral (its wake-up carries the stage), or
 *        another attempt revoked its licence (a deferral, a success), or a chain's end found
 *        it retried or redelivered after it failed for good, or it sent the stage from a
 *        worker BullMQ had handed the job on from (handedOn)
 */

import { ENQUEUE_PROBE } from './generated';

/** Lua snippet: the licence members of stage `sid` in `idx`. */
const licences = (idx: string, sid: string) =>
  `redis.call('ZRANGEBYLEX', ${idx}, '[' .. ${sid} .. '@', '[' .. ${sid} .. '@\\255')`;

/** Lua helpers shared by the scripts that read licences, job hashes and locks. */
const HELPERS = `
-- a lock value's token, and whether a cancel marked it. The mark is a leading newline: no token
-- starts with one but a direct call's ('\\n<fence>'), which has no second one
local function unmark(l)
  if string.sub(l, 1, 1) == '\\n' and string.find(l, '\\n', 2, true) then return string.sub(l, 2), true end
  return l, false
end
-- a job attempt's token (unmarked, '<job id>\\n<fence>\\n<BullMQ token>'): its job id and BullMQ's
-- lock token of the job; nil for a direct call's ('<job id>\\n<fence>')
local function tiedTo(t)
  local a = string.find(t, '\\n', 1, true)
  local b = a and string.find(t, '\\n', a + 1, true)
  if not b then return nil end
  return string.sub(t, 1, a - 1), string.sub(t, b + 1)
end
-- the job id of a licence member: its mark ('!' or '?') dropped
local function jobOf(lic)
  local last = string.sub(lic, -1)
  if last == '!' or last == '?' then return string.sub(lic, 1, -2) end
  return lic
end
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- the stage kind (last segment) of a stage id
local function kindOf(sid)
  return string.match(sid, '([^/]*)$')
end
-- the capacity wait index of one stage kind: stage ids scored by when their chain of
-- capacity deferrals began (wakeDeferred wakes the longest-waiting first); one per kind, so
-- a wake for one kind never reads another's, and a wake for any kind merges them in order
local function waitKey(BASE, sid)
  return BASE .. 'sd:wq:' .. kindOf(sid)
end
-- a stage's chain of capacity deferrals ended: it leaves the wait index
local function unwait(BASE, sid)
  redis.call('ZREM', waitKey(BASE, sid), sid)
end
-- the wake sequence a dispatch of stage 'sid' watches: wakeDeferred calls for all stages, and for
-- its kind (BATCH reads the same counters in its begins' MGET: see SEEN)
local function wakeSeq(BASE, sid)
  local kind = kindOf(sid)
  return (redis.call('GET', BASE .. 'sd:wseq') or '0') .. ':' .. (redis.call('GET', BASE .. 'sd:wseq:' .. kind) or '0')
end
-- the stage's licence (the first member not marked '?') and its failed-job records ('?')
local function split(members)
  local live, failed = nil, {}
  for _, m in ipairs(members) do
    if string.sub(m, -1) == '?' then failed[#failed + 1] = m elseif not live then live = m end
  end
  return live, failed
end
-- revokes stage 'sid''s licence(s) in IDX (not the failed-job records) and marks their jobs
-- superseded, except job 'keep'; returns the members revoked (the engine removes their jobs), and
-- how many it revoked
local function revoke(IDX, BASE, sid, members, keep)
  local out, n = {}, 0
  for _, m in ipairs(members) do
    if string.sub(m, -1) ~= '?' then
      redis.call('ZREM', IDX, m)
      n = n + 1
      local id = jobOf(m)
      if id ~= keep and redis.call('EXISTS', BASE .. id) == 1 then redis.call('HSET', BASE .. id, 'sds', 1) end
      out[#out + 1] = m
    end
  end
  return out, n
end
`;

/**
 * batch: the hot path. Runs, in order, the begin and release operations the
 * engine queued during one turn of the event loop (one command for many
 * attempts). KEYS: 1 IDX, 2 F. An operation's keys are built from the queue base
 * and its stage id (marker, lock) or job id (the job's hash), in the queue's slot
 * like every key of the queue.
 * ARGV: 1 queue base, 2 number of operations, then per operation:
 *   'b', stageId, own job id ('' for a direct call), lockMs, kind ('w' a wake-up, ''
 *        anything else), skew tolerance ms (how far ahead of Redis' clock a worker may
 *        run: maxClockSkewMs), the job's BullMQ lock token ('' for none: a plain lock)
 *   'r', stageId, own job id, token, mode ('1' chain ended, 'e' a success of a stage that
 *        held nothing, 'h' a job's real failure: it holds the licence, '' otherwise), the job's run ('<timestamp>:<stalled count>',
 *        '' for none; see handedOn)
 * Returns one reply per operation (see `begin` and `release`), then Redis' time in ms.
 */
export const BATCH = `
local IDX = KEYS[1]
local F = KEYS[2]
-- job hashes of licensed jobs are built from the queue base, as BullMQ builds its own (same slot)
local BASE = ARGV[1]
${HELPERS}
-- Redis' time, read once for the whole batch (its fencing tokens, the reply)
local NOW = nowMs()
-- the wake sequence counters (see wakeSeq), by stage kind ('' for all stages: no kind is empty),
-- each read once for the batch (nothing changes them while the script runs), in the MGET of its
-- first begin of their stage kind (no command of their own)
local SEEN = {}
-- the last fencing token, read once for the batch. The first token taken reserves one for every
-- begin of the batch in one write, before any is handed out: a script error half-way leaves no
-- token handed out twice, and the batch writes F once instead of once a token (a begin that
-- takes no lock leaves its token unused: tokens only need to increase)
local FENCE
-- F as the batch's first begin read it with its own keys (false: no such key; nil: not read yet)
local FENCE_LAST
local function nextFence()
  if FENCE then
    FENCE = FENCE + 1
  else
    if FENCE_LAST == nil then FENCE_LAST = redis.call('GET', F) end
    -- a value that is no finite number ('nan', 'inf' and garbage, which tonumber reads as such or
    -- not at all) holds no token: Redis' clock takes over. Past 2^53 less room for a batch, a double
    -- no longer tells a token from the next: refused, rather than a token handed out twice (only a
    -- hand-set F, or a Redis clock some 250 years ahead, gets there; Redis' µs are ~1.8e15 today)
    local last = tonumber(FENCE_LAST) or 0
    if last ~= last or last == math.huge or last == -math.huge then last = 0 end
    if last >= 9007199254740992 - 1048576 then
      error({err = 'ERR bullmq-stage-deferral: ' .. F .. ' holds ' .. tostring(FENCE_LAST) .. ', past the fencing tokens a Lua number counts exactly (2^53): delete it if the Redis clock is right'})
    end
    FENCE = math.max(last + 1, NOW * 1000)
    local begins, a = 0, 3
    for _ = 1, tonumber(ARGV[2]) do
      local op = ARGV[a]
      if op == 'b' then begins = begins + 1; a = a + 7 else a = a + 6 end
    end
    redis.call('SET', F, string.format('%.0f', FENCE + begins - 1))
  end
  return string.format('%.0f', FENCE)
end
-- begin: decide whether a dispatch may run, and take the lock if so.
-- {1, marker, pttl} deferred | {2} in flight | {3} stale wake-up (not the licence)
-- {4} this job was cancelled | {5, pttl} a wake-up promoted early by a clock
-- ahead of Redis' (within the tolerance): wait out the rest | {6} superseded:
-- this job recorded a deferral, its wake-up carries the stage
-- lock taken: the record 'fencing token,failures of this job (BullMQ's count),failures of the
--  licensed job (for a direct call),1 when this attempt starts a fresh chain (a job that failed
--  for good runs again),the wake sequence seen (a wakeDeferred for this stage's filter during the
--  attempt makes its capacity deferral short),1 when the lock keeps the job's BullMQ token,1 when
--  this run ended its own deferral (its marker still named it: a Promote, or due within 20 ms),
--  the number of failed-job records of the stage'
--  alone when the stage has no licence, or {0, that record, the licence, the licensed job's
--  BullMQ opts (JSON, '' when none: its retry budget carries over)}
-- The fencing token is max(last + 1, Redis' time in µs): strictly increasing, also
-- across a restart of a Redis that kept nothing (its clock goes on).
local function begin(M, L, J, sid, own, me, lockMs, wake, tol, bull)
  -- 'bull': the worker's BullMQ lock token of the job ('' for none)
  local token
  -- the marker, the stage lock and (for a job's attempt tied to it) BullMQ's lock of the job, in one read
  local v
  if own ~= '' and bull ~= '' then token = bull end
  local kind = kindOf(sid)
  if FENCE_LAST == nil or SEEN[kind] == nil then
    -- the batch's first begin (or its first of a stage kind): what the batch reads once (the
    -- fence, the wake sequences: see nextFence, SEEN) rides in the same MGET
    -- (M first; the rest, every one under the queue base, at the positions the reads below expect)
    local more = {L, token and BASE .. own .. ':lock' or L}
    local fi, ai, ki
    if FENCE_LAST == nil then more[#more + 1] = F; fi = #more + 1 end
    if SEEN[''] == nil then more[#more + 1] = BASE .. 'sd:wseq'; ai = #more + 1 end
    more[#more + 1] = BASE .. 'sd:wseq:' .. kind
    ki = #more + 1
    v = redis.call('MGET', M, unpack(more))
    if fi then FENCE_LAST = v[fi] end
    if ai then SEEN[''] = v[ai] or '0' end
    SEEN[kind] = v[ki] or '0'
  elseif token then
    v = redis.call('MGET', M, L, BASE .. own .. ':lock')
  else
    v = redis.call('MGET', M, L)
  end
  local m = v[1]
  if m then
    local p = redis.call('PTTL', M)
    if m ~= own then return {1, m, p} end
    -- its own marker: on time (a few ms early), early by a clock (re-delay), or promoted (wake now)
    if p > 20 and p <= tol then return {5, p} end
  end
  local retried = false
  -- the stage's licence (the job that carries it) and failed-job records, read once
  local lic, failed = split(${licences('IDX', 'sid')})
  -- the running job's own fields, read once: cancelled, superseded, BullMQ's failures of it
  local c = {}
  if own ~= '' then
    c = redis.call('HMGET', J, 'sdc', 'sds', 'atm', 'timestamp', 'finishedOn')
    -- the job is no longer this worker's to run: BullMQ's lock of it is gone or another worker's
    -- (a worker frozen past its job lock: the job was redelivered, maybe already finished or
    -- removed; BullMQ would refuse this worker's completion, and the redelivery runs it), or, for
    -- a caller without BullMQ's token, its hash is gone or finished
    if bull ~= '' then
      if v[3] ~= token then return {7} end
    elseif not c[4] or c[5] then
      return {7}
    end
    if c[1] then return {4} end
    -- a job recorded as failed for good runs again: retried by hand (or redelivered after its worker
    -- died before BullMQ failed it): a fresh chain, on the budget BullMQ gives it
    for _, r in ipairs(failed) do
      if r == me .. '?' then retried = true end
    end
    if c[2] then return {6} end
  end
  -- a lock (it lives while its key exists) is another attempt's, or this job's own, cancelled:
  -- CANCEL marked that job ('sdc', read above), so it never gets here
  if v[2] then return {2} end
  -- a job runs only as the job that carries the stage (its licence), or when none does; a wake-up
  -- only as its licence holder. A licence whose job is gone (removed by hand) carries nothing
  if own ~= '' and lic ~= me and lic ~= me .. '!' then
    if lic and redis.call('EXISTS', BASE .. jobOf(lic)) == 0 then
      -- (its chain ended with it: the stage leaves the wait index too)
      redis.call('ZREM', IDX, lic)
      unwait(BASE, sid)
      lic = nil
    end
    if lic or (wake == 'w' and not retried) then return {wake == 'w' and 3 or 6} end
  end
  local carried, opts = 0, ''
  if retried then
    -- its record goes; it carries the stage as a fresh chain ('!')
    redis.call('ZREM', IDX, me .. '?')
    if lic ~= me .. '!' then
      if lic then redis.call('ZREM', IDX, lic) end
      lic = me .. '!'
      redis.call('ZADD', IDX, 0, lic)
    end
  elseif own == '' and lic then
    -- a direct call carries the licence holder's failures (BullMQ's count of them) and budget
    local h = redis.call('HMGET', BASE .. jobOf(lic), 'opts', 'atm')
    carried = tonumber(h[2]) or 0
    opts = h[1] or ''
  end
  if m then redis.call('DEL', M) end
  local fence = nextFence()
  -- a job's attempt keeps the worker's BullMQ token in its value: its release tells by it whether
  -- BullMQ handed the job on meanwhile (see handedOn)
  local tied = own ~= '' and bull ~= ''
  if tied then
    redis.call('SET', L, own .. '\\n' .. fence .. '\\n' .. bull, 'PX', lockMs)
  else
    redis.call('SET', L, own .. '\\n' .. fence, 'PX', lockMs)
  end
  -- failures this job spent in its chain: BullMQ's own count of them
  local mine = tonumber(c[3]) or 0
  -- the numbers and short fields in one string (one reply element to build and to decode); the
  -- licence and the opts (free text) beside it, only when there are any
  local rec = fence .. ',' .. mine .. ',' .. carried .. ',' .. (retried and 1 or 0) .. ',' .. SEEN[''] .. ':' .. SEEN[kind] .. ','
    .. (tied and 1 or 0) .. ',' .. (m and 1 or 0) .. ',' .. #failed
  if not lic and opts == '' then return rec end
  return {0, rec, lic or '', opts}
end


-- a success (or a chain's end) released by an attempt whose worker BullMQ no longer lets finish
-- the job: it stalled past BullMQ's job lock but not past lockMs, so the job, handed on, waited
-- for this attempt and would run again and send the stage again. It is marked superseded.
-- 't': the attempt's token ('<job id>\\n<fence>\\n<BullMQ token>' when tied to the job);
-- 'run': '<timestamp>:<stalled count>' of the job as the attempt's run got it ('' for none).
-- Handed on means: the same job (its timestamp: not one re-added under its id), not finished,
-- no longer under this run's lock, and either BullMQ's stalled check moved it since this run
-- began (its stalled count grew) or will (its lock is gone while it is still in the active
-- list). A job retried by hand meanwhile is neither (its count is kept, and it waits or runs
-- under a lock of its own): it is left alone
local function handedOn(t, run)
  if run == '' then return end
  local id, bull = tiedTo(t)
  if not id then return end
  -- (BullMQ's lock first: still this run's, the common case, is one read)
  local lock = redis.call('GET', BASE .. id .. ':lock')
  if lock == bull then return end
  local c = string.find(run, ':', 1, true)
  local h = redis.call('HMGET', BASE .. id, 'timestamp', 'finishedOn', 'stc')
  if h[1] ~= string.sub(run, 1, c - 1) or h[2] then return end
  local moved = (tonumber(h[3]) or 0) > (tonumber(string.sub(run, c + 1)) or 0)
  if moved or (not lock and redis.call('LPOS', BASE .. 'active', id)) then redis.call('HSET', BASE .. id, 'sds', 1) end
end

-- release: end an attempt that did not defer. mode '1': the chain ended (a success, a
-- bound): revoke the licence and drop the records of failed jobs that are gone. mode 'h'
-- (a job's real failure; it will be retried or failed for good): in the same step, while
-- the lock is still held, the job takes the stage's licence and keeps the chain it ran in
-- (chain: 'capacity.idempotent.failures'), revoking the holder it took over from.
-- Only the holder of the lock may change anything: an attempt whose lock expired (another
-- one may have recorded a deferral since) changes nothing. mode 'e': a success of a stage whose
-- begin found no licence and no record (none can appear during the attempt but a record of a job
-- whose worker then dies: at least once, as after any crash): the lock's release alone.
-- {0 released | 1 cancelled | 2 lock lost, revoked licence...}
-- a chain ended with the stage sent: the jobs of its failed-job records ('?') that will run again
-- are superseded (see release); records whose jobs are gone are dropped, and so are those an
-- operator retried by hand before this
local function supersedeRecords(sid, own, members)
  for _, m in ipairs(members) do
    if string.sub(m, -1) == '?' then
      local id = jobOf(m)
      -- the record's job as it is now (no 'timestamp': the job is gone)
      local f = redis.call('HMGET', BASE .. id, 'timestamp', 'finishedOn')
      if not f[1] then
        redis.call('ZREM', IDX, m)
      elseif id ~= own and not f[2] then
        -- a job failed for good that BullMQ has not finished (now) runs again: retried by hand
        -- before this chain ended (Retry all on two failed jobs of the stage), or redelivered
        -- (its worker died before BullMQ failed it). The stage went out meanwhile: it is
        -- superseded, and its record goes
        redis.call('HSET', BASE .. id, 'sds', 1)
        redis.call('ZREM', IDX, m)
      end
    end
  end
end

local function release(L, sid, own, token, mode, me, run)
  local l = redis.call('GET', L)
  if l ~= token and l ~= '\\n' .. token then return {2} end
  redis.call('DEL', L)
  local cancelled = 0
  if l ~= token then cancelled = 1 end
  if mode == '1' or mode == 'e' then handedOn(token, run) end
  if mode == 'e' then return {cancelled} end
  if mode == 'h' and cancelled == 0 and own ~= '' then
    -- a job removed while it ran (by hand) takes nothing: no one would run it again
    if not redis.call('HGET', BASE .. own, 'timestamp') then return {0} end
    local live = split(${licences('IDX', 'sid')})
    local old = {}
    if live ~= me and live ~= me .. '!' then
      if live then old = revoke(IDX, BASE, sid, {live}, own) end
      redis.call('ZADD', IDX, 0, me)
    end
    return {cancelled, unpack(old)}
  end
  if mode ~= '1' then return {cancelled} end
  local members = ${licences('IDX', 'sid')}
  local revoked, n = revoke(IDX, BASE, sid, members, own)
  -- the chain ended: the stage leaves the wait index, also when no licence was left to revoke
  -- (its wake-up removed by hand, the licence dropped by an enqueue's probe)
  unwait(BASE, sid)
  if n > 0 then
    -- the chain ended: a job added for the stage while its licence holder was pending (by a
    -- producer that skipped the enqueue probe, which would have answered 'pending') would
    -- dispatch it again; it is superseded, as the probe would have kept it from being added
    local d = redis.call('GET', BASE .. 'de:' .. sid)
    if d and d ~= own and redis.call('EXISTS', BASE .. d) == 1 then redis.call('HSET', BASE .. d, 'sds', 1) end
  end
  supersedeRecords(sid, own, members)
  return {cancelled, unpack(revoked)}
end

local out = {}
local a = 3
local n = tonumber(ARGV[2])
for i = 1, n do
  local op, sid = ARGV[a], ARGV[a + 1]
  local L = BASE .. 'sd:inflight:' .. sid
  if op == 'b' then
    local own = ARGV[a + 2]
    local M = BASE .. 'sd:deferred:' .. sid
    local J = BASE .. own
    out[i] = begin(M, L, J, sid, own, own, ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5]), ARGV[a + 6])
    a = a + 7
  else
    out[i] = release(L, sid, ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 2], ARGV[a + 5])
    a = a + 6
  end
end
out[n + 1] = NOW
return out
`;

/**
 * defer: record a deferral; runs in the same MULTI as the wake-up's add.
 * KEYS: 1 L, 2 M, 3 IDX, 4 the wake-up's log list, 5 D, 6 J (the deferring job's hash)
 * ARGV: 1 stageId, 2 token, 3 wake-up id, 4 the window's end (ms, Redis' clock),
 *       5 log line ('' for none), 6 the deferring job's id ('' for a direct call), 7 queue base,
 *       8 class ('capacity' | 'idempotent'), 9 '1' when this is the chain's first capacity
 *       deferral, 'h' when the downstream hinted its window (retryAfterMs), 10 the wake
 *       sequence the attempt saw at its begin ('' to ignore)
 * A capacity deferral enters the wait indexes (scored by its chain's start); a hinted one
 * leaves them (wakeDeferred never wakes it). If a
 * wakeDeferred for the stage's filter ran since the attempt began, a capacity
 * deferral is not recorded ({0, 2}): the engine records it again with a short window,
 * so that signal is not consumed by nothing.
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
  if l == '\\n' .. ARGV[2] then
    redis.call('DEL', KEYS[1])
    return {0, 1}
  end
  return {0, 0}
end
if ARGV[8] == 'capacity' and ARGV[10] ~= '' and wakeSeq(ARGV[7], ARGV[1]) ~= ARGV[10] then return {0, 2} end
local old = revoke(KEYS[3], ARGV[7], ARGV[1], ${licences('KEYS[3]', 'ARGV[1]')}, ARGV[6])
redis.call('ZADD', KEYS[3], 0, ARGV[3])
redis.call('SET', KEYS[2], ARGV[3], 'PX', math.max(1, tonumber(ARGV[4]) - nowMs()))
redis.call('DEL', KEYS[1])
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[4], ARGV[5]) end
if ARGV[9] == 'h' then
  -- a downstream's hint (retryAfterMs) says "not before": the chain leaves the line wakeDeferred
  -- reads, and joins it again at its next plain capacity deferral
  redis.call('ZREM', waitKey(ARGV[7], ARGV[1]), ARGV[1])
elseif ARGV[8] == 'capacity' then
  -- the first capacity deferral of a chain starts its wait; a later one keeps the start
  if ARGV[9] == '1' then
    redis.call('ZADD', waitKey(ARGV[7], ARGV[1]), nowMs(), ARGV[1])
  else
    redis.call('ZADD', waitKey(ARGV[7], ARGV[1]), 'NX', nowMs(), ARGV[1])
  end
  redis.call('SADD', ARGV[7] .. 'sd:wqk', kindOf(ARGV[1]))
end
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
 * Returns 1 renewed, 2 renewed but cancelled (abort the executor), 0 lost (expired, taken
 * over, or tied to a BullMQ job lock the job no longer holds: its worker lost the job)
 */
export const EXTEND = `
local l = redis.call('GET', KEYS[1])
if l == ARGV[1] or l == '\\n' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if l == ARGV[1] then return 1 end
  return 2
end
return 0
`;

/**
 * probe: what an enqueue finds, in one call (its licence's job state
 * included). The source is the shipped src/lua/enqueue-probe.lua, whose
 * header documents KEYS, ARGV and replies; generated.ts holds its text.
 */
export const PROBE = ENQUEUE_PROBE;

/**
 * cancel: end a stage's deferral and revoke its licence; mark an in-flight
 * dispatch cancelled; mark every job of the stage the engine knows of
 * (licensed, failed for good, pending through D, the one whose attempt holds
 * the lock) cancelled, so none of them
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
unwait(ARGV[2], ARGV[1])
-- every member goes; their jobs are marked and listed (the engine removes them)
local old = {}
for _, o in ipairs(${licences('KEYS[3]', 'ARGV[1]')}) do
  redis.call('ZREM', KEYS[3], o)
  mark(jobOf(o))
  old[#old + 1] = o
end
local l = redis.call('GET', KEYS[2])
local inflight = 0
if l then
  inflight = 1
  local t, marked = unmark(l)
  if not marked then redis.call('SET', KEYS[2], '\\n' .. l, 'KEEPTTL') end
  -- the job whose attempt holds the lock ('' for a direct call) is marked too: a job's lock dies
  -- with BullMQ's lock of the job, and with it the lock's mark, so a redelivery (its worker
  -- stalled or died) must meet the cancel on the job itself
  local holder = string.sub(t, 1, (string.find(t, '\\n', 1, true) or 1) - 1)
  if holder ~= '' then mark(holder) end
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
 * clear: a wake by scope, one batch of it. Ends the deferral of each licence
 * given whose marker still names it, whatever its class: the marker is
 * deleted, the licence marked '!' (the chain starts fresh) and the stage
 * leaves the wait index. The engine then promotes their wake-ups. A licence
 * whose marker is gone or names another wake-up (woken, run, cancelled, cleared
 * meanwhile, or deferred again) is left alone: each deferral is ended, and
 * counted, by one call only.
 * KEYS: 1 IDX   ARGV: 1 queue base, 2.. licences (wake-up ids) of the scope
 * Returns the wake-up ids whose deferral this call ended.
 */
export const CLEAR = `
${HELPERS}
local BASE = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local sid = string.sub(id, 1, string.find(id, '@', 1, true) - 1)
  local M = BASE .. 'sd:deferred:' .. sid
  if redis.call('GET', M) == id then
    redis.call('DEL', M)
    if redis.call('ZREM', KEYS[1], id) == 1 then redis.call('ZADD', KEYS[1], 0, id .. '!') end
    unwait(BASE, sid)
    out[#out + 1] = id
  end
end
return out
`;

/**
 * fail: a dispatch job failed for good. It is recorded as a failed-job member
 * `<job id>?` (its licence, if it held it, becomes that): nothing of it counts
 * as pending, a cancel can still reach it, and a retry by hand of it runs with
 * a fresh chain. A stage licensed to another job keeps that licence.
 * KEYS: 1 IDX, 2 J, 3 J's BullMQ lock ('<J>:lock')   ARGV: 1 stageId, 2 the failed job's id, 3 queue
 *   base, 4 the failing worker's BullMQ token ('' none), 5 '1' when BullMQ keeps the job as it
 *   fails (its removeOnFail: keptWhenFinished), '0' when it removes it
 * Returns 1 recorded, 0 the job is gone, 2 the worker no longer holds the job (nothing written:
 * BullMQ, which redelivered it, would refuse that worker's failure too)
 */
export const FAIL = `
${HELPERS}
-- a job that no longer exists (an attempt that lost its lock long ago) leaves no record
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if ARGV[4] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[4] then return 2 end
local me = ARGV[2]
local live = split(${licences('KEYS[1]', 'ARGV[1]')})
-- the chain ends with its holder's failure; a job failing for good while another job holds the
-- licence (a wake-up whose window ended) leaves that chain, and its place in the wait index, alone
if live == me or live == me .. '!' then redis.call('ZREM', KEYS[1], live) end
if not live or live == me or live == me .. '!' then unwait(ARGV[3], ARGV[1]) end
-- a job BullMQ removes as it fails leaves no record behind (ARGV[5] '0': its removeOnFail, read by
-- keptWhenFinished); one kept a while is recorded, so a cancel still reaches it. A Worker's own
-- removeOnFail is not seen: its record stays until the chain's end drops records whose jobs are gone
if ARGV[5] == '0' then return 1 end
redis.call('ZADD', KEYS[1], 0, me .. '?')
return 1
`;

/**
 * permissions: run once per connection before anything else, so a Redis ACL
 * that lacks a command the engine needs is found at start-up, not half-way
 * through a deferral. Calls every command the engine's scripts use, on a probe
 * key of the queue that it leaves as it found it (it is deleted again).
 * KEYS: 1 a probe key under the queue's base, 2 F (not written: in KEYS for the slot)
 * Returns the commands the connection's user may not run (empty: all allowed).
 */
export const PERMISSIONS = `
local K = KEYS[1]
local missing = {}
local readonly = false
local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    -- Redis 7.0 says 'ERR The user executing the script can't run this command', later ones 'NOPERM ...'
    if string.find(r.err, 'NOPERM', 1, true) or string.find(r.err, "can't run this command", 1, true) then
      missing[#missing + 1] = string.lower((select(1, ...)))
    elseif string.find(r.err, 'READONLY', 1, true) then
      readonly = true
    end
  end
end
-- DEL first, on a key that does not exist: without it, nothing is written (it could not be undone)
try('DEL', K)
if #missing > 0 then return missing end
try('TIME')
try('PERSIST', K)
try('SET', K, '1', 'PX', 60000)
try('GET', K)
try('MGET', K)
try('PTTL', K)
try('PEXPIRE', K, 60000)
try('EXISTS', K)
try('DEL', K)
try('INCRBY', K, 1)
try('INCR', K)
try('DEL', K)
try('ZADD', K, 0, 'p')
try('ZSCORE', K, 'p')
try('ZRANGE', K, 0, 0)
try('ZRANGEBYLEX', K, '[p', '[p')
try('ZREMRANGEBYRANK', K, 0, 0)
try('ZREM', K, 'p')
try('HSET', K, 'p', 1)
try('HGET', K, 'p')
try('HMGET', K, 'p')
try('HINCRBY', K, 'p', 1)
try('HDEL', K, 'p')
try('RPUSH', K, 'p')
try('LPOS', K, 'p')
try('DEL', K)
try('SADD', K, 'p')
try('SMEMBERS', K)
try('SREM', K, 'p')
try('DEL', K)
if readonly then return {'!readonly'} end
return missing
`;

/**
 * wake: capacity has returned: end the deferral of up to `limit` capacity-
 * deferred stages, longest-waiting first (by when their chain of capacity
 * deferrals began; ties by stage id), filtered by a scope prefix and/or a
 * stage kind. Their markers are deleted (no longer deferred at once) and
 * their licences kept (the chain goes on); the engine then promotes their
 * wake-ups. Idempotent deferrals are never woken, nor a stage whose wake-up
 * job is gone (removed by hand, drained, cleaned). The wake sequences are
 * bumped, so an attempt of a matching stage in flight now records a short
 * window instead of the full one (the signal is not consumed by nothing).
 * KEYS: 1 IDX, 2 the set of stage kinds with a wait index, 3 the kind's wait index (KEYS[2] for none;
 *   declared for the cluster's routing, read as BASE .. 'sd:wq:' .. kind)
 * ARGV: 1 queue base, 2 limit, 3 scope prefix ('' none), 4 encoded stage kind ('' none)
 * Returns the woken stages as {stage id, wake-up id} pairs, in the order woken.
 */
export const WAKE = `
${HELPERS}
local BASE, limit, scope, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if kind ~= '' then redis.call('INCR', BASE .. 'sd:wseq:' .. kind) else redis.call('INCR', BASE .. 'sd:wseq') end
-- a stage deferred for capacity whose wake-up still exists: its wake-up id. One whose wake-up is
-- gone (removed by hand, a drain or a clean) is skipped: waking it would spend the signal on a
-- stage nothing would run. (One promoted already is woken: its deferral ends at once)
local function deferredCap(sid)
  local m = redis.call('GET', BASE .. 'sd:deferred:' .. sid)
  if m and string.find(m, '@cap.', 1, true) and redis.call('EXISTS', BASE .. m) == 1 then return m end
  return nil
end
local picked = {}
if scope == '' then
  -- one kind's index, or every kind's merged: each read in score order, 200 at a time
  local src = {}
  if kind ~= '' then
    src[1] = {kind = kind}
  else
    -- a queue upgraded from the queue-wide index (sd:wq): its kinds join the set, 10,000 entries a wake
    local legacy = BASE .. 'sd:wq'
    for _, sid in ipairs(redis.call('ZRANGE', legacy, 0, 9999)) do redis.call('SADD', KEYS[2], kindOf(sid)) end
    redis.call('ZREMRANGEBYRANK', legacy, 0, 9999)
    for _, k in ipairs(redis.call('SMEMBERS', KEYS[2])) do src[#src + 1] = {kind = k} end
  end
  for _, s in ipairs(src) do s.buf, s.i, s.offset = {}, 1, 0 end
  -- the source's next entry {sid, score}, reading another batch when its buffer is spent
  local function head(s)
    if s.i > #s.buf then
      if s.offset < 0 then return nil end
      local r = redis.call('ZRANGE', BASE .. 'sd:wq:' .. s.kind, s.offset, s.offset + 199, 'WITHSCORES')
      -- a kind whose chains all ended leaves the set (its next capacity deferral adds it again)
      if #r == 0 and s.offset == 0 then redis.call('SREM', KEYS[2], s.kind) end
      s.buf, s.i = {}, 1
      for j = 1, #r, 2 do s.buf[#s.buf + 1] = {r[j], tonumber(r[j + 1])} end
      s.offset = (#r < 400) and -1 or s.offset + 200
      if #s.buf == 0 then return nil end
    end
    return s.buf[s.i]
  end
  while #picked < limit do
    local best, bh = nil, nil
    for _, s in ipairs(src) do
      local h = head(s)
      if h and (not bh or h[2] < bh[2] or (h[2] == bh[2] and h[1] < bh[1])) then best, bh = s, h end
    end
    if not best then break end
    best.i = best.i + 1
    local m = deferredCap(bh[1])
    if m then picked[#picked + 1] = {bh[1], m} end
  end
else
  local cands = {}
  for _, lic in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], '[' .. scope, '[' .. scope .. '\\255')) do
    local last = string.sub(lic, -1)
    if last ~= '!' and last ~= '?' then
      local sid = string.sub(lic, 1, string.find(lic, '@', 1, true) - 1)
      if kind == '' or kindOf(sid) == kind then
        local m = deferredCap(sid)
        local score = m == lic and redis.call('ZSCORE', waitKey(BASE, sid), sid)
        if score then cands[#cands + 1] = {sid, m, tonumber(score)} end
      end
    end
  end
  table.sort(cands, function(a, b) if a[3] ~= b[3] then return a[3] < b[3] end return a[1] < b[1] end)
  for i = 1, math.min(limit, #cands) do picked[i] = {cands[i][1], cands[i][2]} end
end
local out = {}
for _, p in ipairs(picked) do
  redis.call('DEL', BASE .. 'sd:deferred:' .. p[1])
  out[#out + 1] = p[1]
  out[#out + 1] = p[2]
end
return out
`;

/**
 * An enqueue with \`replace\`: the newest payload wins for the stage's job that
 * has not begun. KEYS: the stage's marker. ARGV: the stage id, the queue base,
 * the job id ('': the wake-up the marker names), the job's data as last read
 * ('' at first), the new data built from it. Writes only a job that will still
 * send it: BullMQ never started it (\`ats\`, \`atm\` 0: it waits, delayed or
 * not, unfinished, and as BullMQ's moves run as scripts too no run begins
 * before the write), it is not marked cancelled or superseded, and its data
 * names the stage in wire format v1. Answers 1 written, 0 not, or the job's
 * data when it is not what was read (the first call, or a concurrent replace
 * wrote meanwhile): build the new data from that and call again.
 */
export const REPLACE = `
${HELPERS}
local id = ARGV[3]
if id == '' then id = redis.call('GET', KEYS[1]) end
if not id then return 0 end
local J = ARGV[2] .. id
local h = redis.call('HMGET', J, 'data', 'ats', 'atm', 'sdc', 'sds')
if not h[1] or (tonumber(h[2]) or 0) > 0 or (tonumber(h[3]) or 0) > 0 or h[4] or h[5] then return 0 end
if h[1] ~= ARGV[4] then return h[1] end
local ok, o = pcall(cjson.decode, h[1])
if not ok or type(o) ~= 'table' or o.v ~= 1 then return 0 end
redis.call('HSET', J, 'data', ARGV[5])
return 1
`;
