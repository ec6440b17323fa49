--[[
  replace: an enqueue with `replace`: the newest payload wins for the stage's
  job that has not begun. Writes only a job that will still send it: BullMQ
  never started it (`ats`, `atm` 0: it waits, delayed or not, unfinished, and as
  BullMQ's moves run as scripts too no run begins before the write), it is not
  marked cancelled or superseded, and its data is in wire format v1 (its id names the stage).

    KEYS[1] M, the stage's marker
    ARGV[1] stageId   ARGV[2] queue base
    ARGV[3] the job id ('': the wake-up the marker names)
    ARGV[4] the job's data as last read ('' at first)
    ARGV[5] the new data built from it

    Returns 1 written, 0 not, or the job's data when it is not what was read
    (the first call, or a concurrent replace wrote meanwhile): build the new
    data from that and call again.
]]
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
