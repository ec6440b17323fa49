-- the licence members of stage 'sid' in the licence index IDX (every dispatch job's id starts '<sid>@')
local function licences(IDX, sid)
  return redis.call('ZRANGEBYLEX', IDX, '[' .. sid .. '@', '[' .. sid .. '@\255')
end
-- the job id of a licence member: its mark ('!' or '?') dropped
local function jobOf(lic)
  local last = string.sub(lic, -1)
  if last == '!' or last == '?' then return string.sub(lic, 1, -2) end
  return lic
end
-- the stage's licence (the first member not marked '?') and its failed-job records ('?')
local function split(members)
  local live, failed = nil, {}
  for _, m in ipairs(members) do
    if string.sub(m, -1) == '?' then failed[#failed + 1] = m elseif not live then live = m end
  end
  return live, failed
end
-- revokes stage 'sid''s licence(s) in IDX (not the failed-job records) and marks their jobs
-- superseded, except job 'keep'; returns the members revoked (the engine removes their jobs)
local function revoke(IDX, BASE, sid, members, keep)
  local out = {}
  for _, m in ipairs(members) do
    if string.sub(m, -1) ~= '?' then
      redis.call('ZREM', IDX, m)
      local id = jobOf(m)
      if id ~= keep and redis.call('EXISTS', BASE .. id) == 1 then redis.call('HSET', BASE .. id, 'sds', 1) end
      out[#out + 1] = m
    end
  end
  return out
end
