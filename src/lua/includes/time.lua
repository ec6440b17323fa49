-- Redis' time in ms (its own clock: every window and wake-up timestamp is on it)
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
