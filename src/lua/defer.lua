--[[
  defer: record a deferral; runs in the same MULTI as the wake-up's add.

    KEYS[1] L, the stage's lock       KEYS[2] M, the stage's marker
    KEYS[3] IDX, the licence index    KEYS[4] the wake-up's log list
    KEYS[5] D, BullMQ's deduplication key of the stage
    KEYS[6] J, the deferring job's hash
    ARGV[1] stageId   ARGV[2] token   ARGV[3] wake-up id
    ARGV[4] the window's end (ms, Redis' clock)   ARGV[5] log line ('' for none)
    ARGV[6] the deferring job's id ('' for a direct call)   ARGV[7] queue base
    ARGV[8] class ('capacity' | 'idempotent')
    ARGV[9] '1' when this is the chain's first capacity deferral, 'h' when the
            downstream hinted its window (retryAfterMs)
    ARGV[10] the wake sequence the attempt saw at its begin ('' to ignore)
    ARGV[11] the stage's resource (encoded, '' for none): its line replaces the
             kind's wait index
    ARGV[12] 'c' the answer closes the resource's gate until ARGV[4] (kept
             ARGV[13] ms longer), 'g' a gated deferral (recorded only while the
             gate is still closed), '' neither
    ARGV[14] the resource whose line's wake sequence the begin read (encoded,
             '' for none): ARGV[10] holds that line's count, which may not be
             ARGV[11]'s (an answer naming another resource)

  A capacity deferral enters the wait indexes (scored by its chain's start); a
  hinted one leaves them (wakeDeferred never wakes it). If a wakeDeferred for the
  stage's filter ran since the attempt began, a capacity deferral is not
  recorded ({0, 2}): the engine records it again with a short window, so that
  signal is not consumed by nothing.
  The marker expires at the window's end by Redis' clock, the same instant the
  wake-up is due (its timestamp is Redis' time too), whatever the host's clock says.
  The deferring job is marked superseded (`sds`) and, if `enqueue` added it,
  gives up its deduplication key: if it is retried (it threw after this
  transaction), its begin stops instead of dispatching the stage a second time.
  A wake-up id is unique per deferral, so finding it already licensed means this
  very transaction ran before (a client resent it after a failover): {1} again.

    Returns {1, closed, old licence...} recorded (closed: 1 when this closed a gate
            that was open or probed), lock released; the old licences are revoked
            {0, 1}              cancelled while in flight: nothing recorded, lock released
            {0, 2}              a wakeDeferred ran meanwhile, or the gate of a gated
                                deferral opened: nothing recorded
            {0, 0}              lock lost: nothing recorded
]]
--- @include "time"
--- @include "wait"
--- @include "licences"
-- the wake sequence a dispatch of stage 'sid' watches: wakeDeferred calls for all stages, and for
-- its kind (BATCH reads the same counters in its begins' MGET: see SEEN)
local function wakeSeq(BASE, sid, res)
  local kind = kindOf(sid)
  local seq = (redis.call('GET', BASE .. 'sd:wseq') or '0') .. ':' .. (redis.call('GET', BASE .. 'sd:wseq:' .. kind) or '0')
  if res ~= '' then seq = seq .. ':' .. (redis.call('GET', BASE .. 'sd:wseq:@' .. res) or '0') end
  return seq
end
if redis.call('ZSCORE', KEYS[3], ARGV[3]) or redis.call('ZSCORE', KEYS[3], ARGV[3] .. '!') then return {1, 0} end
local l = redis.call('GET', KEYS[1])
if l ~= ARGV[2] then
  if l == '\n' .. ARGV[2] then
    redis.call('DEL', KEYS[1])
    return {0, 1}
  end
  return {0, 0}
end
local res, gate = ARGV[11], ARGV[12]
-- (a gated one watches its gate alone: a wake that leaves the gate closed would only park it again)
-- (the counters the begin read, the line's of the resource it read: not that of one the answer names)
if ARGV[8] == 'capacity' and ARGV[10] ~= '' and gate ~= 'g' and wakeSeq(ARGV[7], ARGV[1], ARGV[14]) ~= ARGV[10] then
  return {0, 2}
end
-- a gated deferral whose gate opened since its begin (a success, a wake of the line): not parked
local G = res ~= '' and gateKey(ARGV[7], res)
if gate == 'g' and not redis.call('GET', G) then return {0, 2} end
local old = revoke(KEYS[3], ARGV[7], ARGV[1], licences(KEYS[3], ARGV[1]), ARGV[6])
redis.call('ZADD', KEYS[3], 0, ARGV[3])
redis.call('SET', KEYS[2], ARGV[3], 'PX', math.max(1, tonumber(ARGV[4]) - nowMs()))
redis.call('DEL', KEYS[1])
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[4], ARGV[5]) end
local closed = 0
if gate == 'c' then
  local g = redis.call('GET', G)
  if not g or string.sub(g, 1, 1) == 'p' or (tonumber(g) or 0) <= nowMs() then closed = 1 end
  redis.call('SET', G, ARGV[4], 'PX', math.max(1, tonumber(ARGV[4]) - nowMs() + tonumber(ARGV[13])))
end
-- the line the chain waits in: its resource's, else its kind's
local line = res ~= '' and lineKey(ARGV[7], res) or waitKey(ARGV[7], ARGV[1])
-- a chain waits in one line: one that waited in its kind's (a deferral of it named no resource)
-- leaves it, and keeps its start in its resource's
local start = nowMs()
if res ~= '' and ARGV[8] == 'capacity' then
  local kind = waitKey(ARGV[7], ARGV[1])
  start = tonumber(redis.call('ZSCORE', kind, ARGV[1])) or start
  redis.call('ZREM', kind, ARGV[1])
end
if ARGV[9] == 'h' then
  -- a downstream's hint (retryAfterMs) says "not before": the chain leaves the line wakeDeferred
  -- reads, and joins it again at its next plain capacity deferral
  redis.call('ZREM', line, ARGV[1])
elseif ARGV[8] == 'capacity' then
  -- the first capacity deferral of a chain starts its wait; a later one keeps the start
  if ARGV[9] == '1' then
    redis.call('ZADD', line, nowMs(), ARGV[1])
  else
    redis.call('ZADD', line, 'NX', start, ARGV[1])
  end
  if res == '' then
    redis.call('SADD', ARGV[7] .. 'sd:wqk', kindOf(ARGV[1]))
  else
    -- a line lives while a deferral in it does: a stage whose chain ended elsewhere (a cancel, a
    -- renamed resource) is dropped by the next wake of the line, or with the line itself. Its TTL
    -- is set with as much again to spare, so the deferrals that follow within it write nothing
    -- more (a gated deferral writes no more than a plain one)
    local ttl = math.max(1, tonumber(ARGV[4]) - nowMs() + tonumber(ARGV[13]))
    if redis.call('PTTL', line) < ttl then redis.call('PEXPIRE', line, 2 * ttl) end
  end
end
local own = ARGV[6]
if own ~= '' then
  if redis.call('GET', KEYS[5]) == own then redis.call('DEL', KEYS[5]) end
  if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('HSET', KEYS[6], 'sds', 1) end
end
return {1, closed, unpack(old)}
