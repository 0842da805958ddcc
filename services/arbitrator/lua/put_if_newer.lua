-- Store a fact only if it is newer than what is stored, so replicas applying events in any order converge
-- on the latest. A fact is one string "<resourceVersion>|<encoded object>" (read back in bulk with MGET).
-- Prepended with versions.lua.
-- KEYS[1] the fact's key; ARGV[1] resourceVersion; ARGV[2] the encoded fact, or "" to delete (tombstone)
local stored = redis.call('GET', KEYS[1])
if stored then
  local rv = string.sub(stored, 1, (string.find(stored, '|', 1, true) or (#stored + 1)) - 1)
  if compare_versions(ARGV[1], rv) <= 0 then return 0 end
end
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1] .. '|', 'EX', 3600)  -- a tombstone guards against a late older event
else
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2])
end
return 1
