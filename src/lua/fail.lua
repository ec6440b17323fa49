--[[
  fail: a dispatch job failed for good. It is recorded as a failed-job member
  `<job id>?` (its licence, if it held it, becomes that): nothing of it counts
  as pending, a cancel can still reach it, and a retry by hand of it runs with
  a fresh chain. A stage licensed to another job keeps that licence.

    KEYS[1] IDX, the licence index   KEYS[2] J, the failed job's hash
    KEYS[3] J's BullMQ lock ('<J>:lock')
    ARGV[1] stageId   ARGV[2] the failed job's id   ARGV[3] queue base
    ARGV[4] the failing worker's BullMQ token ('' none)
    ARGV[5] '1' when BullMQ keeps the job as it fails (its removeOnFail:
            keptWhenFinished), '0' when it removes it

    Returns 1 recorded, 0 the job is gone (its record too), 2 the worker no longer holds the job
    (nothing written: BullMQ, which redelivered it, would refuse that worker's
    failure too)
]]
--- @include "wait"
--- @include "licences"
-- a job that no longer exists (an attempt that lost its lock long ago) leaves no record, nor keeps
-- one written before BullMQ removed it (a sandboxed processor cannot read its Worker's removeOnFail:
-- the parent's attachWorker listener, which runs after the removal, drops the record here)
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[2] .. '?')
  return 0
end
if ARGV[4] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[4] then return 2 end
local me = ARGV[2]
local live = split(licences(KEYS[1], ARGV[1]))
-- the chain ends with its holder's failure; a job failing for good while another job holds the
-- licence (a wake-up whose window ended) leaves that chain, and its place in the wait index, alone
if live == me or live == me .. '!' then redis.call('ZREM', KEYS[1], live) end
if not live or live == me or live == me .. '!' then unwait(ARGV[3], ARGV[1]) end
-- a job BullMQ removes as it fails leaves no record behind (ARGV[5] '0': its removeOnFail, else
-- the Worker's, read by keptWhenFinished); one kept a while is recorded, so a cancel still reaches it
if ARGV[5] == '0' then return 1 end
redis.call('ZADD', KEYS[1], 0, me .. '?')
return 1
