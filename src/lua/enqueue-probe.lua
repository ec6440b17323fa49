--[[
  Enqueue probe of bullmq-stage-deferral (wire format v1): what an enqueue of
  one stage finds, in one round trip, before the producer's deduplicating add.
  The engine's own `enqueue` runs this script; a producer in another language
  runs it too (EVALSHA, or EVAL of this file's text). See docs/producers.md.

    Input:
      KEYS[1] '<base>sd:deferred:<stageId>'  the stage's deferral marker
      KEYS[2] '<base>sd:inflight:<stageId>'  the stage's in-flight dispatch lock
      KEYS[3] '<base>sd:licences'            the queue's licence index
      ARGV[1] stageId                        the encoded stage ref (docs/producers.md, "Stage ids")
    where <base> is BullMQ's '<prefix>:<queueName>:', e.g. 'bull:stage-dispatch:'
    (with a hash tag in the prefix on a Redis Cluster).

    Output:
      {1, pttl}   deferred: a wake-up runs the stage in pttl ms; add nothing (a marker
                  whose wake-up job is gone defers nothing)
      {2}         a dispatch of the stage is in flight (its lock is live); add nothing
      {3, jobId}  a job that carries the stage is pending (waiting, delayed,
                  active, or failed for good and retried by hand); add nothing
      {0}         nothing pending: add the job (BullMQ's add, deduplication id = stageId)

    The lock counts while its key exists, whatever its value.

    Writes: nothing, but for a licence whose job no longer exists (removed by
    hand) a ZREM of it from KEYS[3] and of the stage from its kind's wait index
    ('<base>sd:wq:<stage kind>'), and a ZREM of a record whose job is gone. It
    reads the wake-up and job hashes and BullMQ's 'completed' and
    'failed' sets under <base>, in the queue's slot like BullMQ's own keys.
]]
local BASE = string.sub(KEYS[3], 1, #KEYS[3] - #'sd:licences')
-- deferred while the marker names a wake-up that exists (one removed by hand runs nothing)
local marker = redis.call('GET', KEYS[1])
if marker and redis.call('EXISTS', BASE .. marker) == 1 then return {1, redis.call('PTTL', KEYS[1])} end
-- the in-flight lock counts while its key exists (PX lockMs, renewed while its executor runs)
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
-- a job waits, is delayed or runs: its hash exists and it is neither completed nor failed
local function pending(id)
  return redis.call('EXISTS', BASE .. id) == 1
    and not redis.call('ZSCORE', BASE .. 'completed', id)
    and not redis.call('ZSCORE', BASE .. 'failed', id)
end
-- the stage's members sort under '<stageId>@' (every dispatch job id does): its licence (at most
-- one, maybe marked '!': the job that carries the stage) and records of jobs that failed for
-- good (marked '?'). A licence whose job is gone (removed by hand) is dropped.
local members = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[1] .. '@', '[' .. ARGV[1] .. '@\255')
local records = {}
for _, member in ipairs(members) do
  local last = string.sub(member, -1)
  local id = member
  if last == '!' or last == '?' then id = string.sub(member, 1, -2) end
  if last == '?' then
    -- a record whose job is gone (removed by hand, or by BullMQ's removeOnFail trim) is dropped
    if redis.call('EXISTS', BASE .. id) == 0 then
      redis.call('ZREM', KEYS[3], member)
    else
      records[#records + 1] = id
    end
  elseif pending(id) then
    return {3, id}
  elseif redis.call('EXISTS', BASE .. id) == 0 then
    -- its chain ended with it: the stage leaves the wait index of its kind too
    redis.call('ZREM', KEYS[3], member)
    redis.call('ZREM', BASE .. 'sd:wq:' .. string.match(ARGV[1], '([^/]*)$'), ARGV[1])
  end
end
-- a record is pending once its job was retried by hand (no longer failed)
for _, id in ipairs(records) do
  if pending(id) then return {3, id} end
end
return {0}
