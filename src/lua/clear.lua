--[[
  clear: a wake by scope, one batch of it. Ends the deferral of each licence
  given whose marker still names it, whatever its class: the marker is
  deleted, the licence marked '!' (the chain starts fresh) and the stage
  leaves the wait index. The engine then promotes their wake-ups. A licence
  whose marker is gone or names another wake-up (woken, run, cancelled, cleared
  meanwhile, or deferred again) is left alone: each deferral is ended, and
  counted, by one call only.

    KEYS[1] IDX, the licence index
    ARGV[1] queue base   ARGV[2..] licences (wake-up ids) of the scope

    Returns the wake-up ids whose deferral this call ended.
]]
--- @include "wait"
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
