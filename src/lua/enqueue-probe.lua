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
      {1, pttl}   deferred: a wake-up runs the stage in pttl ms; add nothing
      {2}         a dispatch of the stage is in flight (its lock is live); add nothing
      {3, jobId}  a job that carries the stage is pending (waiting, delayed,
                  active, or failed for good and retried by hand); add nothing
      {0}         nothing pending: add the job (BullMQ's add, deduplication id = stageId)

    The lock counts while its key exists, whatever its value.

    Writes: nothing, but ZREMs on KEYS[3]: of a licence whose job no longer
    exists (removed by hand), and of a member '<stageId>@j.<id>' (a job added by
    hand) whose job's data no longer names the stage (the job was removed and
    its id reused for another stage's job). It reads job hashes and BullMQ's 'completed' and
    'failed' sets under <base>, in the queue's slot like BullMQ's own keys.
]]
local BASE = string.sub(KEYS[3], 1, #KEYS[3] - #'sd:licences')
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, redis.call('PTTL', KEYS[1])} end
-- the in-flight lock counts while its key exists (PX lockMs, renewed while its executor runs)
if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
-- a job waits, is delayed or runs: its hash exists and it is neither completed nor failed
local function pending(id)
  return redis.call('EXISTS', BASE .. id) == 1
    and not redis.call('ZSCORE', BASE .. 'completed', id)
    and not redis.call('ZSCORE', BASE .. 'failed', id)
end
-- whether job <id> is this stage's: its hash says so ('sdi'), or its data names the stage (its
-- scope and stage are the stage id's segments, percent-decoded: docs/producers.md, "Stage
-- ids"). The engine's scripts apply the same rule (`ownJob` in src/lua/scripts.ts;
-- test/reused-job-id.test.ts walks both)
local function names(id)
  -- the engine records the stage on a job that took a member, or whose data it read ('sdi')
  local s = redis.call('HGET', BASE .. id, 'sdi')
  if s then return s == ARGV[1] end
  local d = redis.call('HGET', BASE .. id, 'data')
  if not d then return true end
  -- data cjson cannot decode (nesting past 1000) cannot tell: the job counts as the stage's
  local ok, o = pcall(cjson.decode, d)
  if not ok then return true end
  if type(o) ~= 'table' or type(o.scope) ~= 'table' then return false end
  local parts = {}
  for seg in string.gmatch(ARGV[1], '[^/]+') do
    parts[#parts + 1] = (string.gsub(seg, '%%(%x%x)', function(h) return string.char(tonumber(h, 16)) end))
  end
  if #parts ~= #o.scope + 1 or o.stage ~= parts[#parts] then return false end
  for i = 1, #o.scope do
    if o.scope[i] ~= parts[i] then return false end
  end
  return true
end
-- the stage's members sort under '<stageId>@': its licence (at most one, maybe marked '!')
-- and records of jobs that failed for good (marked '?'). The job id of a member: its mark
-- dropped, and '<stageId>@j.<id>' (a job whose id is not the engine's) unwrapped.
local members = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[1] .. '@', '[' .. ARGV[1] .. '@\255')
local records = {}
for _, member in ipairs(members) do
  local bare = string.gsub(member, '[!?]$', '')
  local id = string.match(bare, '^[^@]*@j%.(.+)$')
  -- '<stageId>@j.<id>' names a job by an id the engine did not make: the job under that id is the
  -- stage's only while `names` says so; another one (the first removed, its id reused by hand
  -- for another stage's job) counts as gone
  local own = true
  if id then own = names(id) else id = bare end
  if not own then
    redis.call('ZREM', KEYS[3], member)
  elseif string.sub(member, -1) == '?' then
    records[#records + 1] = id
  elseif pending(id) then
    return {3, id}
  elseif redis.call('EXISTS', BASE .. id) == 0 then
    redis.call('ZREM', KEYS[3], member)
  end
end
-- a record is pending once its job was retried by hand (no longer failed)
for _, id in ipairs(records) do
  if pending(id) then return {3, id} end
end
return {0}
