--[[
  wake: capacity has returned: end the deferral of up to `limit` capacity-
  deferred stages, longest-waiting first (by when their chain of capacity
  deferrals began; ties by stage id), filtered by a scope prefix and/or a
  stage kind. Their markers are deleted (no longer deferred at once) and
  their licences kept (the chain goes on); the engine then promotes their
  wake-ups. Idempotent deferrals are never woken, nor a stage whose wake-up
  job is gone (removed by hand, drained, cleaned). The wake sequences are
  bumped, so an attempt of a matching stage in flight now records a short
  window instead of the full one (the signal is not consumed by nothing).

    KEYS[1] IDX, the licence index
    KEYS[2] the set of stage kinds with a wait index
    KEYS[3] the kind's wait index (KEYS[2] for none; declared for the cluster's
            routing, read as BASE .. 'sd:wq:' .. kind)
    ARGV[1] queue base   ARGV[2] limit (for a line, 'r<limit>': round robin across books)
    ARGV[3] scope prefix ('' none)
    ARGV[4] encoded stage kind ('' none), or '@<encoded resource>': that
            resource's line (its gate is deleted first; no scope)

    Returns the woken stages as {stage id, wake-up id} pairs, in the order woken;
    for a line, then 1 when a gate was deleted, else 0.
]]
--- @include "wait"
local BASE, limit, scope, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if kind ~= '' then redis.call('INCR', BASE .. 'sd:wseq:' .. kind) else redis.call('INCR', BASE .. 'sd:wseq') end
-- a resource's line ('@<resource>'): its gate opens, its oldest chains wake. Its wake count
-- matters only to attempts in flight: it goes a day after the resource's last wake
if string.sub(kind, 1, 1) == '@' then
  redis.call('PEXPIRE', BASE .. 'sd:wseq:' .. kind, 86400000)
  local res = string.sub(kind, 2)
  local out = {}
  local opened = redis.call('DEL', gateKey(BASE, res))
  wakeLine(BASE, res, ARGV[2], out)
  out[#out + 1] = opened
  return out
end
local picked = {}
if scope == '' then
  -- one kind's index, or every kind's merged: each read in score order, 200 at a time
  local src = {}
  if kind ~= '' then
    src[1] = {kind = kind}
  else
    for _, k in ipairs(redis.call('SMEMBERS', KEYS[2])) do src[#src + 1] = {kind = k} end
  end
  for _, s in ipairs(src) do s.buf, s.i, s.offset = {}, 1, 0 end
  -- the source's next entry {sid, score}, reading another batch when its buffer is spent
  local function head(s)
    if s.i > #s.buf then
      if s.offset < 0 then return nil end
      local r = redis.call('ZRANGE', BASE .. 'sd:wq:' .. s.kind, s.offset, s.offset + 199, 'WITHSCORES')
      -- a kind whose chains all ended leaves the set (its next capacity deferral adds it again)
      if #r == 0 and s.offset == 0 then redis.call('SREM', KEYS[2], s.kind) end
      s.buf, s.i = {}, 1
      for j = 1, #r, 2 do s.buf[#s.buf + 1] = {r[j], tonumber(r[j + 1])} end
      s.offset = (#r < 400) and -1 or s.offset + 200
      if #s.buf == 0 then return nil end
    end
    return s.buf[s.i]
  end
  while #picked < limit do
    local best, bh = nil, nil
    for _, s in ipairs(src) do
      local h = head(s)
      if h and (not bh or h[2] < bh[2] or (h[2] == bh[2] and h[1] < bh[1])) then best, bh = s, h end
    end
    if not best then break end
    best.i = best.i + 1
    local m = deferredCap(BASE, bh[1])
    if m then picked[#picked + 1] = {bh[1], m} end
  end
else
  local cands = {}
  for _, lic in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], '[' .. scope, '[' .. scope .. '\255')) do
    local last = string.sub(lic, -1)
    if last ~= '!' and last ~= '?' then
      local sid = string.sub(lic, 1, string.find(lic, '@', 1, true) - 1)
      if kind == '' or kindOf(sid) == kind then
        local m = deferredCap(BASE, sid)
        local score = m == lic and redis.call('ZSCORE', waitKey(BASE, sid), sid)
        if score then cands[#cands + 1] = {sid, m, tonumber(score)} end
      end
    end
  end
  table.sort(cands, function(a, b) if a[3] ~= b[3] then return a[3] < b[3] end return a[1] < b[1] end)
  for i = 1, math.min(limit, #cands) do picked[i] = {cands[i][1], cands[i][2]} end
end
local out = {}
for _, p in ipairs(picked) do
  redis.call('DEL', BASE .. 'sd:deferred:' .. p[1])
  out[#out + 1] = p[1]
  out[#out + 1] = p[2]
end
return out
