-- the stage kind (last segment) of a stage id
local function kindOf(sid)
  return string.match(sid, '([^/]*)$')
end
-- the capacity wait index of one stage kind: stage ids scored by when their chain of
-- capacity deferrals began (wakeDeferred wakes the longest-waiting first); one per kind, so
-- a wake for one kind never reads another's, and a wake for any kind merges them in order
local function waitKey(BASE, sid)
  return BASE .. 'sd:wq:' .. kindOf(sid)
end
-- a stage's chain of capacity deferrals ended: it leaves the wait index
local function unwait(BASE, sid)
  redis.call('ZREM', waitKey(BASE, sid), sid)
end
-- a stage deferred for capacity whose wake-up still exists: its wake-up id. One whose wake-up is
-- gone (removed by hand, a drain or a clean) is skipped: waking it would spend the signal on a
-- stage nothing would run. (One promoted already is woken: its deferral ends at once)
local function deferredCap(BASE, sid)
  local m = redis.call('GET', BASE .. 'sd:deferred:' .. sid)
  if m and string.find(m, '@cap.', 1, true) and redis.call('EXISTS', BASE .. m) == 1 then return m end
  return nil
end
-- a resource's gate (encoded name): '<until>' closed, 'p<lease end>' one probe in flight, none: open
local function gateKey(BASE, res)
  return BASE .. 'sd:gate:' .. res
end
-- a resource's line: a wait index of its own ('@' is never in an encoded stage kind)
local function lineKey(BASE, res)
  return BASE .. 'sd:wq:@' .. res
end
-- wakes up to n stages of a resource's line, oldest chain first: deletes their markers and appends
-- {stage id, wake-up id} pairs to 'out'. An entry whose stage holds nothing (its chain ended
-- outside the line's sight: a cancel, a failure) leaves the line; one in flight or woken stays
-- (its chain keeps its place)
local function wakeLine(BASE, res, n, out)
  local line = lineKey(BASE, res)
  local picked, offset = 0, 0
  while picked < n do
    local r = redis.call('ZRANGE', line, offset, offset + 199)
    if #r == 0 then break end
    offset = offset + #r
    for _, sid in ipairs(r) do
      local m = deferredCap(BASE, sid)
      if m then
        redis.call('DEL', BASE .. 'sd:deferred:' .. sid)
        out[#out + 1] = sid
        out[#out + 1] = m
        picked = picked + 1
        if picked == n then break end
      elseif #redis.call('ZRANGEBYLEX', BASE .. 'sd:licences', '[' .. sid .. '@', '[' .. sid .. '@\255', 'LIMIT', 0, 1) == 0 then
        redis.call('ZREM', line, sid)
        offset = offset - 1
      end
    end
  end
  return picked
end
