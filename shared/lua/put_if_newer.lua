-- Store a fact only if it is newer than what is stored (resourceVersions compared as numbers when both
-- are numeric, else as strings), so replicas applying events in any order converge on the latest.
-- KEYS[1] the fact's key; ARGV[1] resourceVersion; ARGV[2] the encoded fact, or "" to delete (tombstone)
local stored = redis.call('HGET', KEYS[1], 'rv')
if stored then
  local a, b = tonumber(stored), tonumber(ARGV[1])
  if a and b then
    if b <= a then return 0 end
  elseif ARGV[1] <= stored then
    return 0
  end
end
if ARGV[2] == '' then
  redis.call('HSET', KEYS[1], 'rv', ARGV[1], 'data', '')
  redis.call('EXPIRE', KEYS[1], 3600)  -- a tombstone guards against a late older event, then goes
else
  redis.call('HSET', KEYS[1], 'rv', ARGV[1], 'data', ARGV[2])
  redis.call('PERSIST', KEYS[1])
end
return 1
