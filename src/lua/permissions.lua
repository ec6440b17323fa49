--[[
  permissions: run once per connection before anything else, so a Redis ACL
  that lacks a command the engine needs is found at start-up, not half-way
  through a deferral. Calls every command the engine's scripts use, on a probe
  key of the queue that it leaves as it found it (it is deleted again).

    KEYS[1] a probe key under the queue's base
    KEYS[2] F (not written: in KEYS for the slot)
    ARGV: none

    Returns the commands the connection's user may not run (empty: all allowed).
]]
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
-- (Redis checks a command's ACL and a replica's READONLY before it runs it: on a key of another
-- type a command still answers whether it may run, with WRONGTYPE, and writes nothing)
try('PERSIST', K)
try('SET', K, '1', 'PX', 60000)
try('GET', K)
try('MGET', K)
try('PTTL', K)
try('PEXPIRE', K, 60000)
try('EXISTS', K)
try('INCR', K)
try('ZADD', K, 0, 'p')
try('ZSCORE', K, 'p')
try('ZRANGE', K, 0, 0)
try('ZRANGEBYLEX', K, '[p', '[p')
try('ZREM', K, 'p')
try('HSET', K, 'p', 1)
try('HGET', K, 'p')
try('HMGET', K, 'p')
try('RPUSH', K, 'p')
try('LPOS', K, 'p')
try('SADD', K, 'p')
try('SMEMBERS', K)
try('SREM', K, 'p')
try('DEL', K)
if readonly then return {'!readonly'} end
return missing
