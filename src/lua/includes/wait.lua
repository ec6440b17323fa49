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
-- whether a line entry's stage holds no licence (its chain ended outside the line's sight: a cancel,
-- a failure for good, which leaves at most records of failed jobs, marked '?'): it leaves the line.
-- One in flight or woken stays (its chain keeps its place)
local function holdsNothing(BASE, sid)
  for _, m in ipairs(redis.call('ZRANGEBYLEX', BASE .. 'sd:licences', '[' .. sid .. '@', '[' .. sid .. '@\255')) do
    if string.sub(m, -1) ~= '?' then return false end
  end
  return true
end
-- a round-robin wake looks this many entries of the line past its first n
local FAIR_WINDOW = 2000
-- the book (first scope segment) a round-robin wake of a resource's line woke last: the next
-- begins after it (only the order depends on it)
local function turnKey(BASE, res)
  return BASE .. 'sd:turn:' .. res
end
-- wakes up to n stages of a resource's line: deletes their markers and appends {stage id, wake-up
-- id} pairs to 'out'. 'n': oldest chain first. 'r<n>': round robin across books (first scope
-- segment): one stage of each book in turn, oldest chain first within each, books in name order
-- from the one after the book the last round-robin wake ended on (so wakes of one take turns too);
-- it reads at most n + FAIR_WINDOW entries of the line and looks up at most n stages of one book
-- (no more can wake). (Oldest first is the same walk with each stage a book of its own, stopped
-- at n: no bound, no turn)
local function wakeLine(BASE, res, spec, out)
  local fair = string.sub(spec, 1, 1) == 'r'
  local n = tonumber(fair and string.sub(spec, 2) or spec)
  local upto = fair and n + FAIR_WINDOW or math.huge
  local line = lineKey(BASE, res)
  local offset, books, order = 0, {}, {}
  while (fair or #order < n) and offset < upto do
    local r = redis.call('ZRANGE', line, offset, math.min(offset + 199, upto - 1))
    if #r == 0 then break end
    offset = offset + #r
    for _, sid in ipairs(r) do
      local book = fair and string.match(sid, '^[^/]*') or sid
      local q = books[book]
      if not q or #q < n then
        local m = deferredCap(BASE, sid)
        if m then
          if not q then
            q = {book = book}
            books[book] = q
            order[#order + 1] = q
          end
          q[#q + 1] = {sid, m}
          if #order == n and not fair then break end
        elseif holdsNothing(BASE, sid) then
          redis.call('ZREM', line, sid)
          offset = offset - 1
        end
      end
    end
  end
  if fair then
    -- books in name order, starting after the last wake's
    table.sort(order, function(a, b) return a.book < b.book end)
    local turn, from = redis.call('GET', turnKey(BASE, res)) or '', 1
    while order[from] and order[from].book <= turn do from = from + 1 end
    local rotated = {}
    for i = 0, #order - 1 do rotated[#rotated + 1] = order[(from - 1 + i) % #order + 1] end
    order = rotated
  end
  local picked, round, last = 0, 1, nil
  while picked < n do
    local any = false
    for _, q in ipairs(order) do
      local p = q[round]
      if p and picked < n then
        redis.call('DEL', BASE .. 'sd:deferred:' .. p[1])
        out[#out + 1] = p[1]
        out[#out + 1] = p[2]
        picked, any, last = picked + 1, true, q.book
      end
    end
    if not any then break end
    round = round + 1
  end
  if fair and last then redis.call('SET', turnKey(BASE, res), last, 'PX', 86400000) end
  return picked
end
