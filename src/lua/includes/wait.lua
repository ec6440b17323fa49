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
