-- Shared by the ledger scripts (prepended to each): where pending jobs wait, and how they are woken.
--
-- A parking place is what the ledger's keys call a "gate": a full slot set or an empty token bucket that a
-- job waits on. It is neither an eviction gate (skipEvictionGates) nor the gate service.
--
-- A pending job is in exactly one place: the ready queue <p>:queue (a sorted set read in lexicographic
-- order: member = "<sort key>|<job uid>"), or parked. A job the ledger defers is parked on the gate that
-- stopped it: "slot:<key>" (a full slot set) or "bucket:<key>" (an empty token bucket) in the sorted set
-- <p>:wait:<gate>, or on "timer" (waiting for facts) in <p>:timers. Parked jobs cost nothing per pass,
-- so a pass reads only jobs that may fit: no head-of-line blocking however many jobs wait.
--
-- A gate is woken one job at a time, best first, when its room may have grown: a slot released or
-- reclaimed, a background eviction ended, a token due, the facts behind its limit changed. The woken job
-- re-enters the ready queue at its sort position. When it leaves the queue for any reason other than being
-- parked on the same gate again, the gate is woken again if it still has room ("pass on"): a gate with
-- room and waiters always has one waiter in the ready queue, so a release costs O(1), not O(waiters).
--
-- The keys (queued, parked, gates, limit, unavailable, bucketcfg, wokefrom, timers, ...) are the table K,
-- from shared/ledger/keys.py, which says what each holds.

local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function tokens_at(p, key, now)
  local cfg = redis.call('HGET', p .. K.bucketcfg, key)
  if not cfg then return nil end
  local rate, burst = string.match(cfg, '^(%S+) (%S+)$')
  rate, burst = tonumber(rate), tonumber(burst)
  local state = redis.call('HMGET', p .. K.bucket .. key, 'tokens', 'ts')
  local tokens, ts = tonumber(state[1]), tonumber(state[2])
  if tokens == nil then return burst, rate end
  return math.min(burst, tokens + math.max(0, now - ts) * rate), rate
end

-- A workload's unavailability as maxUnavailablePerWorkload counts it: each job in flight once, whether its
-- old pod is still Ready (it may yet go) or not (then it stands for the replica missing until its replacement
-- is Ready); pods evicted in the background; and the replicas missing or not Ready beyond those jobs, out of
-- `replicas`. <p>:ready:<key> holds the workload's Ready pods (pod_ready.lua keeps it from the pod events),
-- <p>:gone:<key> the jobs in flight whose old pod is not among them (track_gone). Returns the count, and its
-- part not due to migrations. O(1): no set is walked.
local function unavailable_used(p, key, replicas)
  local jobs = redis.call('SCARD', p .. K.slots .. key)
  local ready, gone = redis.call('SCARD', p .. K.ready .. key), redis.call('SCARD', p .. K.gone .. key)
  local other = math.max(0, replicas - ready - gone)
  return jobs + redis.call('SCARD', p .. K.evicting .. key) + other, other
end

-- Whether `job`, holding workload slot `key`, stands for a replica that is not Ready: its pod left the set.
local function track_gone(p, key, pod, job)
  if redis.call('SISMEMBER', p .. K.ready .. key, pod) == 1 then
    redis.call('SREM', p .. K.gone .. key, job)
  else
    redis.call('SADD', p .. K.gone .. key, job)
  end
end

-- `job` let go of its slots `keys` (released, or expired).
local function leave(p, job, keys)
  for _, key in ipairs(keys) do
    redis.call('SREM', p .. K.slots .. key, job)
    redis.call('SREM', p .. K.gone .. key, job)
  end
end

-- Room at `gate` now: true, or false and (for buckets) when the next token is due.
local function room(p, gate, now)
  local kind, key = string.match(gate, '^(%a+):(.*)$')
  if kind == 'slot' then
    local limit = tonumber(redis.call('HGET', p .. K.limit, key) or '0')
    local used = redis.call('SCARD', p .. K.slots .. key) + redis.call('SCARD', p .. K.evicting .. key)
    if used >= limit then return false, nil end
    local unavailable = redis.call('HGET', p .. K.unavailable, key)
    if unavailable then
      local most, replicas = string.match(unavailable, '^(%S+) (%S+)$')
      return unavailable_used(p, key, tonumber(replicas)) < tonumber(most), nil
    end
    return true, nil
  elseif kind == 'bucket' then
    local available, rate = tokens_at(p, key, now)
    if available == nil or available >= 1 then return true, nil end
    if rate <= 0 then return false, nil end
    return false, now + (1 - available) / rate
  end
  return true, nil
end

local function job_of(member)
  return string.match(member, '|([^|]*)$')
end

-- Move the best waiter of `gate` back to the ready queue. Returns its uid, or nil.
local function wake(p, gate)
  local popped = redis.call('ZPOPMIN', p .. K.wait .. gate)
  if #popped == 0 then
    redis.call('SREM', p .. K.gates, gate)
    return nil
  end
  local member = popped[1]
  local job = job_of(member)
  redis.call('HDEL', p .. K.parked, job)
  redis.call('ZADD', p .. K.queue, 0, member)
  redis.call('HSET', p .. K.wokefrom, job, gate)
  if redis.call('ZCARD', p .. K.wait .. gate) == 0 then redis.call('SREM', p .. K.gates, gate) end
  return job
end

-- Wake the next waiter of `gate` if it has room; for a bucket without a token, set a timer for the next one.
local function pass_on(p, gate, now)
  if redis.call('EXISTS', p .. K.wait .. gate) == 0 then return nil end
  local ok, due = room(p, gate, now)
  if ok then return wake(p, gate) end
  if due then redis.call('ZADD', p .. K.timers, 'LT', due, 'gate:' .. gate) end  -- LT still adds
  return nil
end

-- Take `job` out of wherever it waits (queue, a gate, the timers); returns its member or nil.
local function unqueue(p, job, now)
  local member = redis.call('HGET', p .. K.queued, job)
  if not member then return nil end
  local gate = redis.call('HGET', p .. K.parked, job)
  if gate then
    redis.call('HDEL', p .. K.parked, job)
    if gate == 'timer' then
      redis.call('ZREM', p .. K.timers, 'job:' .. job)
    else
      redis.call('ZREM', p .. K.wait .. gate, member)
      if redis.call('ZCARD', p .. K.wait .. gate) == 0 then redis.call('SREM', p .. K.gates, gate) end
    end
  else
    redis.call('ZREM', p .. K.queue, member)
  end
  local from = redis.call('HGET', p .. K.wokefrom, job)
  if from then
    redis.call('HDEL', p .. K.wokefrom, job)
    pass_on(p, from, now)
  end
  return member
end

-- Park a job that is in the ready queue on `gate` (or on the timer list until `due`).
local function park(p, job, member, gate, due)
  redis.call('ZREM', p .. K.queue, member)
  redis.call('HSET', p .. K.parked, job, gate)
  if gate == 'timer' then
    redis.call('ZADD', p .. K.timers, due, 'job:' .. job)
  else
    redis.call('ZADD', p .. K.wait .. gate, 0, member)
    redis.call('SADD', p .. K.gates, gate)
  end
end

-- Due timers: jobs back to the queue, gates woken (or re-timed). Bounded work per call.
local function fire_timers(p, now, max)
  local due = redis.call('ZRANGEBYSCORE', p .. K.timers, '-inf', now, 'LIMIT', 0, max)
  for _, entry in ipairs(due) do
    redis.call('ZREM', p .. K.timers, entry)
    local kind, rest = string.match(entry, '^(%a+):(.*)$')
    if kind == 'job' then
      local member = redis.call('HGET', p .. K.queued, rest)
      if member and redis.call('HGET', p .. K.parked, rest) == 'timer' then
        redis.call('HDEL', p .. K.parked, rest)
        redis.call('ZADD', p .. K.queue, 0, member)
      end
    else
      pass_on(p, rest, now)
    end
  end
  return #due
end

-- Slots of `keys` were freed: wake one waiter per key (pass-on wakes more while room lasts).
local function freed(p, keys, now)
  for _, key in ipairs(keys) do pass_on(p, 'slot:' .. key, now) end
end
