--[[
  cancel: end a stage's deferral and revoke its licence; mark an in-flight
  dispatch cancelled; mark every job of the stage the engine knows of
  (licensed, failed for good, pending through D, the one whose attempt holds
  the lock) cancelled, so none of them dispatches later, even if an operator
  retries it by hand.

    KEYS[1] M, the stage's marker   KEYS[2] L, the stage's lock
    KEYS[3] IDX, the licence index  KEYS[4] D, BullMQ's deduplication key of the stage
    ARGV[1] stageId   ARGV[2] queue base

    Returns {had marker 0|1, in flight 0|1, pending job id or '', revoked licence...}
]]
--- @include "wait"
--- @include "licences"
-- a lock value's token, and whether a cancel marked it. The mark is a leading newline: no token
-- starts with one but a direct call's ('\n<fence>'), which has no second one
local function unmark(l)
  if string.sub(l, 1, 1) == '\n' and string.find(l, '\n', 2, true) then return string.sub(l, 2), true end
  return l, false
end
local function mark(id)
  local J = ARGV[2] .. id
  if redis.call('EXISTS', J) == 1 then redis.call('HSET', J, 'sdc', 1) end
end
local had = redis.call('DEL', KEYS[1])
unwait(ARGV[2], ARGV[1])
-- every member goes; their jobs are marked and listed (the engine removes them)
local old = {}
for _, o in ipairs(licences(KEYS[3], ARGV[1])) do
  redis.call('ZREM', KEYS[3], o)
  mark(jobOf(o))
  old[#old + 1] = o
end
local l = redis.call('GET', KEYS[2])
local inflight = 0
if l then
  inflight = 1
  local t, marked = unmark(l)
  if not marked then redis.call('SET', KEYS[2], '\n' .. l, 'KEEPTTL') end
  -- the job whose attempt holds the lock ('' for a direct call) is marked too: a job's lock dies
  -- with BullMQ's lock of the job, and with it the lock's mark, so a redelivery (its worker
  -- stalled or died) must meet the cancel on the job itself
  local holder = string.sub(t, 1, (string.find(t, '\n', 1, true) or 1) - 1)
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
