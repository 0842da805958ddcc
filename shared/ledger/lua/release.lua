-- Release everything a job holds, exactly once: returns 1 the first time, 0 after (or for a job never admitted).
-- Wakes the best job waiting on each freed slot. Prepended with parking.lua.
-- KEYS[1] the ledger prefix; ARGV[1] job uid
local p, job = KEYS[1], ARGV[1]
local record = redis.call('HGET', p .. K.job .. job, 'slots')
if not record then return 0 end
local keys = cjson.decode(record)
leave(p, job, keys)
local pod = redis.call('HGET', p .. K.job .. job, 'pod')
if pod and redis.call('HGET', p .. K.claims, pod) == job then redis.call('HDEL', p .. K.claims, pod) end
redis.call('DEL', p .. K.job .. job)
redis.call('ZREM', p .. K.expiry, job)
freed(p, keys, clock(nil))
return 1
