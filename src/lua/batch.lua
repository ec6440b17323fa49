--[[
  batch: the hot path. Runs, in order, the begin and release operations the
  engine queued during one turn of the event loop (one command for many
  attempts). An operation's keys are built from the queue base and its stage id
  (marker, lock) or job id (the job's hash), in the queue's slot like every key
  of the queue.

    KEYS[1] '<base>sd:licences'  IDX, the queue's licence index
    KEYS[2] '<base>sd:fence'     F, the queue's fencing counter
    ARGV[1] the queue base '<prefix>:<queue>:'
    ARGV[2] the number of operations, then per operation:
      'b', stageId, own job id ('' for a direct call), lockMs, kind ('w' a wake-up, ''
           anything else), skew tolerance ms (how far ahead of Redis' clock a worker may
           run: maxClockSkewMs), the job's BullMQ lock token ('' for none: a plain lock),
           the stage's resource (encoded, '' for none: no gate is read)
      'r', stageId, own job id, token, mode ('1' chain ended, 'e' a success of a stage that
           held nothing, 'h' a job's real failure: it holds the licence, '' otherwise), the
           job's stalled count as the attempt's run got it ('' for none; see handedOn), the stage's
           resource (encoded, '' for none), and for a success of a stage with a resource how many
           stages of its line to wake ('' for none; 'r<count>' round robin across books;
           'c<window ms>:<kept ms>' for a success that saw no slot left, or a capacity answer
           past the capacity bound: the gate closes)

    Returns one reply per operation (see `begin` and `release`), then Redis' time in ms.
]]
--- @include "time"
--- @include "wait"
--- @include "licences"
local IDX = KEYS[1]
local F = KEYS[2]
-- job hashes of licensed jobs are built from the queue base, as BullMQ builds its own (same slot)
local BASE = ARGV[1]
-- Redis' time, read once for the whole batch (its fencing tokens, the reply)
local NOW = nowMs()
-- the wake sequence counters (see wakeSeq in defer.lua), by stage kind ('' for all stages: no kind is empty),
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
      if op == 'b' then begins = begins + 1 end
      a = a + 8
    end
    redis.call('SET', F, string.format('%.0f', FENCE + begins - 1))
  end
  return string.format('%.0f', FENCE)
end
-- begin: decide whether a dispatch may run, and take the lock if so.
-- {1, marker} deferred | {2} in flight | {3} stale wake-up (not the licence)
-- {4} this job was cancelled | {5, pttl} a wake-up promoted early by a clock
-- ahead of Redis' (within the tolerance): wait out the rest | {6} superseded:
-- this job recorded a deferral, its wake-up carries the stage
-- lock taken: the record 'fencing token,failures of this job (BullMQ's count),failures of the
--  licensed job (for a direct call),the wake sequence seen (a wakeDeferred for this stage's filter during the
--  attempt makes its capacity deferral short),1 when the lock keeps the job's BullMQ token,1 when
--  this run ended its own deferral (its marker still named it: a Promote, or due within 20 ms),
--  the number of failed-job records of the stage,the gate: '' none (or this attempt is its
--  resource's probe), 'g<ms>' gated (the gate is closed, or probed by another, for ms more: the
--  engine records a deferral and calls no executor)'
--  alone when the stage has no licence, or {0, that record, the licence, the licensed job's
--  BullMQ opts (JSON, '' when none: its retry budget carries over)}
-- The fencing token is max(last + 1, Redis' time in µs): strictly increasing, also
-- across a restart of a Redis that kept nothing (its clock goes on).
local function begin(M, L, J, sid, own, lockMs, wake, tol, bull, res)
  -- 'bull': the worker's BullMQ lock token of the job ('' for none)
  local token
  -- the marker, the stage lock and (for a job's attempt tied to it) BullMQ's lock of the job, in one read
  local v
  if own ~= '' and bull ~= '' then token = bull end
  local kind = kindOf(sid)
  -- a stage with a resource watches its line's wake sequence too ('@<resource>')
  if res ~= '' and SEEN['@' .. res] == nil then SEEN['@' .. res] = redis.call('GET', BASE .. 'sd:wseq:@' .. res) or '0' end
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
  -- a marker whose wake-up is gone (removed by hand) defers nothing: nothing would end it but its TTL
  if m and m ~= own and redis.call('EXISTS', BASE .. m) == 0 then
    redis.call('DEL', M)
    m = false
  end
  -- how early a run on time (its own marker has 20 ms or less left) came: it reads its gate as
  -- at its window's end, which may be the gate's own (the stage whose answer closed it)
  local early = 0
  if m then
    -- (another job's marker: the wake-up's id holds the window's end)
    if m ~= own then return {1, m} end
    local p = redis.call('PTTL', M)
    -- its own marker: on time (a few ms early), early by a clock (re-delay), or promoted (wake now)
    if p > 20 and p <= tol then return {5, p} end
    if p > 0 and p <= 20 then early = p end
  end
  local retried = false
  -- the stage's licence (the job that carries it) and failed-job records, read once
  local lic, failed = split(licences(IDX, sid))
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
      if r == own .. '?' then retried = true end
    end
    if c[2] then return {6} end
  end
  -- a lock (it lives while its key exists) is another attempt's, or this job's own, cancelled:
  -- CANCEL marked that job ('sdc', read above), so it never gets here
  if v[2] then return {2} end
  -- a job runs only as the job that carries the stage (its licence), or when none does; a wake-up
  -- only as its licence holder. A licence whose job is gone (removed by hand) carries nothing, nor
  -- does one whose job BullMQ finished by itself (failed as stalled, maxStartedAttempts): that job
  -- is recorded as failed instead. Its chain ended with it: the stage leaves the wait index too
  if own ~= '' and lic ~= own and lic ~= own .. '!' then
    local h = lic and redis.call('HMGET', BASE .. jobOf(lic), 'timestamp', 'finishedOn')
    if h and (not h[1] or h[2]) then
      redis.call('ZREM', IDX, lic)
      -- (a completed job BullMQ keeps, its licence left behind with a lapsed lock, leaves none)
      if h[1] and redis.call('ZSCORE', BASE .. 'failed', jobOf(lic)) then
        redis.call('ZADD', IDX, 0, jobOf(lic) .. '?')
      end
      unwait(BASE, sid)
      lic = nil
    end
    if lic or (wake == 'w' and not retried) then return {wake == 'w' and 3 or 6} end
  end
  local carried, opts = 0, ''
  if retried then
    -- its record goes; it carries the stage as a fresh chain ('!')
    redis.call('ZREM', IDX, own .. '?')
    if lic ~= own .. '!' then
      if lic then redis.call('ZREM', IDX, lic) end
      lic = own .. '!'
      redis.call('ZADD', IDX, 0, lic)
    end
  elseif own == '' and lic then
    -- a direct call carries the licence holder's failures (BullMQ's count of them) and budget
    local h = redis.call('HMGET', BASE .. jobOf(lic), 'opts', 'atm')
    carried = tonumber(h[2]) or 0
    opts = h[1] or ''
  end
  -- the resource's gate: closed (or probed by another) answers gated; once its window ended, the
  -- first attempt to get here is its one probe (a lease of lockMs)
  local gate = ''
  if res ~= '' then
    local G = gateKey(BASE, res)
    local g = redis.call('GET', G)
    if g then
      local probing = string.sub(g, 1, 1) == 'p'
      local untilMs = tonumber(probing and string.sub(g, 2) or g) or 0
      if untilMs > NOW + early then
        gate = 'g' .. (untilMs - NOW)
      else
        -- the key outlives the lease: it lives at least as long as the probe's lock may
        redis.call('SET', G, 'p' .. (NOW + lockMs), 'PX', math.max(redis.call('PTTL', G), lockMs))
      end
    end
  end
  if m then redis.call('DEL', M) end
  local fence = nextFence()
  -- a job's attempt keeps the worker's BullMQ token in its value: its release tells by it whether
  -- BullMQ handed the job on meanwhile (see handedOn)
  local tied = own ~= '' and bull ~= ''
  if tied then
    redis.call('SET', L, own .. '\n' .. fence .. '\n' .. bull, 'PX', lockMs)
  else
    redis.call('SET', L, own .. '\n' .. fence, 'PX', lockMs)
  end
  -- failures this job spent in its chain: BullMQ's own count of them
  local mine = tonumber(c[3]) or 0
  -- the numbers and short fields in one string (one reply element to build and to decode); the
  -- licence and the opts (free text) beside it, only when there are any
  local rec = fence .. ',' .. mine .. ',' .. carried .. ',' .. SEEN[''] .. ':' .. SEEN[kind] .. (res ~= '' and ':' .. SEEN['@' .. res] or '') .. ','
    .. (tied and 1 or 0) .. ',' .. (m and 1 or 0) .. ',' .. #failed .. ',' .. gate
  if not lic and opts == '' then return rec end
  return {0, rec, lic or '', opts}
end

-- a job attempt's token (unmarked, '<job id>\n<fence>\n<BullMQ token>'): its job id and BullMQ's
-- lock token of the job; nil for a direct call's ('<job id>\n<fence>')
local function tiedTo(t)
  local a = string.find(t, '\n', 1, true)
  local b = a and string.find(t, '\n', a + 1, true)
  if not b then return nil end
  return string.sub(t, 1, a - 1), string.sub(t, b + 1)
end
-- a success (or a chain's end) released by an attempt whose worker BullMQ no longer lets finish
-- the job: it stalled past BullMQ's job lock but not past lockMs, so the job, handed on, waited
-- for this attempt and would run again and send the stage again, or BullMQ failed it as stalled
-- meanwhile, and a retry of it by hand would. It is marked superseded.
-- 't': the attempt's token ('<job id>\n<fence>\n<BullMQ token>' when tied to the job);
-- 'stalled': BullMQ's stalled count of the job as the attempt's run got it ('' for none).
-- Handed on means: no longer under this run's lock, and either finished (failed by BullMQ's
-- stalled check), or BullMQ's stalled check moved it since this run began (its stalled count
-- grew) or will (its lock is gone while it is still in the active list). A job retried by hand
-- meanwhile is none of these (its count is kept, and it waits or runs under a lock of its own):
-- it is left alone, as is a job removed and re-added under its id (a fresh count, unfinished)
local function handedOn(t, stalled)
  if stalled == '' then return end
  local id, bull = tiedTo(t)
  if not id then return end
  -- (BullMQ's lock first: still this run's, the common case, is one read)
  local lock = redis.call('GET', BASE .. id .. ':lock')
  if lock == bull then return end
  local h = redis.call('HMGET', BASE .. id, 'finishedOn', 'stc')
  local moved = (tonumber(h[2]) or 0) > tonumber(stalled)
  if h[1] or moved or (not lock and redis.call('LPOS', BASE .. 'active', id)) then redis.call('HSET', BASE .. id, 'sds', 1) end
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
-- a reply of 'x' then the list (a list of any length: unpack has a bound, a line's wake may not)
local function prepend(x, list)
  table.insert(list, 1, x)
  return list
end

local function release(L, sid, own, token, mode, stalled, res, wake)
  local l = redis.call('GET', L)
  if l ~= token and l ~= '\n' .. token then return {2} end
  redis.call('DEL', L)
  local cancelled = 0
  if l ~= token then cancelled = 1 end
  if mode == '1' or mode == 'e' then handedOn(token, stalled) end
  -- a success of a stage with a resource: its gate opens and its line wakes (appended after '':
  -- 1 when a gate was deleted, then the woken pairs). One that saw no slot left (capacityLeft 0,
  -- sent as 'c<window ms>:<kept ms>') closes the gate as a capacity answer would (2 when it was
  -- open or its window had ended)
  local woke = {}
  if wake ~= '' then
    woke[1] = ''
    woke[2] = 0
    if string.sub(wake, 1, 1) == 'c' then
      local c = string.find(wake, ':', 1, true)
      local windowMs = tonumber(string.sub(wake, 2, c - 1))
      local G = gateKey(BASE, res)
      local g = redis.call('GET', G)
      if not g or string.sub(g, 1, 1) == 'p' or (tonumber(g) or 0) <= NOW then woke[2] = 2 end
      redis.call('SET', G, NOW + windowMs, 'PX', windowMs + tonumber(string.sub(wake, c + 1)))
    else
      woke[2] = redis.call('DEL', gateKey(BASE, res))
      wakeLine(BASE, res, wake, woke)
    end
  end
  if res ~= '' and mode == '1' then redis.call('ZREM', lineKey(BASE, res), sid) end
  if mode == 'e' then return prepend(cancelled, woke) end
  if mode == 'h' and cancelled == 0 and own ~= '' then
    -- a job removed while it ran (by hand) takes nothing: no one would run it again
    if not redis.call('HGET', BASE .. own, 'timestamp') then return {0} end
    local live = split(licences(IDX, sid))
    local old = {}
    if live ~= own and live ~= own .. '!' then
      if live then old = revoke(IDX, BASE, sid, {live}, own) end
      redis.call('ZADD', IDX, 0, own)
    end
    return {cancelled, unpack(old)}
  end
  -- (a capacity bound's release closes the gate as its answer would: 'c', and says so)
  if mode ~= '1' then return prepend(cancelled, woke) end
  local members = licences(IDX, sid)
  local revoked = revoke(IDX, BASE, sid, members, own)
  -- the chain ended: the stage leaves the wait index, also when no licence was left to revoke
  -- (its wake-up removed by hand, the licence dropped by an enqueue's probe)
  unwait(BASE, sid)
  if #revoked > 0 then
    -- the chain ended: a job added for the stage while its licence holder was pending (by a
    -- producer that skipped the enqueue probe, which would have answered 'pending') would
    -- dispatch it again; it is superseded, as the probe would have kept it from being added
    local d = redis.call('GET', BASE .. 'de:' .. sid)
    if d and d ~= own and redis.call('EXISTS', BASE .. d) == 1 then redis.call('HSET', BASE .. d, 'sds', 1) end
  end
  supersedeRecords(sid, own, members)
  for _, w in ipairs(woke) do revoked[#revoked + 1] = w end
  return prepend(cancelled, revoked)
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
    out[i] = begin(M, L, J, sid, own, ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5]), ARGV[a + 6], ARGV[a + 7])
  else
    out[i] = release(L, sid, ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7])
  end
  a = a + 8
end
out[n + 1] = NOW
return out
