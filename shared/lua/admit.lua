-- Admit one job, or explain why not: every limit checked first, every write done last (Redis does not roll
-- back a script's earlier writes when it fails midway). All keys share the hash tag in KEYS[1].
--
-- KEYS[1]  the ledger prefix, e.g. "{podherd}:ledger"
-- ARGV[1]  job uid
-- ARGV[2]  pod uid
-- ARGV[3]  slot TTL in seconds (a slot nobody releases is reclaimed after it)
-- ARGV[4]  the plan as JSON: {"slots": [[rule, key, limit, what], ...], "buckets": [[rule, key, rate, burst, what], ...]}
-- ARGV[5]  "now" in seconds; empty means Redis TIME (the only clock in production; tests pin it)
--
-- Returns {"admitted", "<message>"} | {"deferred", rule, message} | {"forbidden", rule, message} | {"closed", "", message}
local p = KEYS[1]
local job, pod, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local plan = cjson.decode(ARGV[4])
local now
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1e6
end

if redis.call('EXISTS', p .. ':marker') == 0 then
  return {'closed', '', 'the ledger is being rebuilt: nothing is admitted until it is'}
end

-- Reclaim a few slots whose jobs vanished without a release (bounded work per call).
local expired = redis.call('ZRANGEBYSCORE', p .. ':expiry', '-inf', now, 'LIMIT', 0, 16)
for _, gone in ipairs(expired) do
  local record = redis.call('HGET', p .. ':job:' .. gone, 'slots')
  if record then
    for _, key in ipairs(cjson.decode(record)) do redis.call('SREM', p .. ':slots:' .. key, gone) end
    local claimed = redis.call('HGET', p .. ':job:' .. gone, 'pod')
    if claimed and redis.call('HGET', p .. ':claims', claimed) == gone then redis.call('HDEL', p .. ':claims', claimed) end
  end
  redis.call('DEL', p .. ':job:' .. gone)
  redis.call('ZREM', p .. ':expiry', gone)
end

if redis.call('EXISTS', p .. ':job:' .. job) == 1 then
  return {'admitted', 'already admitted'}
end
local holder = redis.call('HGET', p .. ':claims', pod)
if holder and holder ~= job then
  return {'forbidden', 'ActiveJob', 'another migration job (' .. holder .. ') is moving this pod'}
end

for _, slot in ipairs(plan.slots) do
  local rule, key, limit, what = slot[1], slot[2], tonumber(slot[3]), slot[4]
  local members = p .. ':slots:' .. key
  if redis.call('SISMEMBER', members, job) == 0 then
    local used = redis.call('SCARD', members) + redis.call('SCARD', p .. ':evicting:' .. key)
    if used + 1 > limit then
      return {'deferred', rule, string.format('deferred: %s %d/%d on %s', rule, used, math.max(limit, 0), what)}
    end
  end
end

local fills = {}
for i, bucket in ipairs(plan.buckets) do
  local rule, key, rate, burst, what = bucket[1], bucket[2], tonumber(bucket[3]), tonumber(bucket[4]), bucket[5]
  local state = redis.call('HMGET', p .. ':bucket:' .. key, 'tokens', 'ts')
  local tokens, ts = tonumber(state[1]), tonumber(state[2])
  if tokens == nil then tokens, ts = burst, now end
  local available = math.min(burst, tokens + math.max(0, now - ts) * rate)
  if available < 1 then
    local wait = (1 - available) / rate
    return {'deferred', rule, string.format('deferred: %s exhausted for %s (next token in %.2fs)', rule, what, wait)}
  end
  fills[i] = available - 1
end

-- Everything holds: take it all.
local keys = {}
for _, slot in ipairs(plan.slots) do
  redis.call('SADD', p .. ':slots:' .. slot[2], job)
  table.insert(keys, slot[2])
end
for i, bucket in ipairs(plan.buckets) do
  redis.call('HSET', p .. ':bucket:' .. bucket[2], 'tokens', fills[i], 'ts', now)
end
redis.call('HSET', p .. ':claims', pod, job)
redis.call('HSET', p .. ':job:' .. job, 'pod', pod, 'slots', cjson.encode(keys), 'admitted', now)
redis.call('ZADD', p .. ':expiry', now + ttl, job)
return {'admitted', 'all limits hold'}
