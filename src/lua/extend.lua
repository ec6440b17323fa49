--[[
  extend: renew the lock while the executor runs.

    KEYS[1] L, the stage's lock
    ARGV[1] token   ARGV[2] lockMs

    Returns 1 renewed, 2 renewed but cancelled (abort the executor), 0 lost
    (expired, taken over, or tied to a BullMQ job lock the job no longer holds:
    its worker lost the job)
]]
local l = redis.call('GET', KEYS[1])
if l == ARGV[1] or l == '\n' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if l == ARGV[1] then return 1 end
  return 2
end
return 0
