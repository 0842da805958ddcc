-- Admit jobs in order, each all or nothing: every limit of a job is checked before any of its writes
-- (Redis does not roll back a script's earlier writes when it fails midway). Jobs earlier in the list take
-- their slots before later ones are looked at, so the order given is the order of admission.
-- All keys share the hash tag in KEYS[1]. Prepended with parking.lua.
--
-- KEYS[1]  the ledger prefix, e.g. "{podherd}:ledger"
-- ARGV[1]  slot TTL in seconds (a slot nobody releases is reclaimed after it)
-- ARGV[2]  "now" in seconds; empty means Redis TIME (the only clock in production; tests pin it)
-- ARGV[3]  "1": the jobs are the head of the ready queue, in order; refuse with "retry" if the head is no
--          longer exactly that (another replica got there first). Every job then leaves the ready queue:
--          decided ones for good (recorded in <p>:announce until their decision is published), deferred
--          ones parked on the gate that stopped them. "0": no queue.
-- ARGV[4]  {"slots": [[rule, key, limit, what(, replicas)], ...], "buckets": [[rule, key, rate, burst, what], ...],
--           "jobs": [[job uid, pod uid, plan], ...]}: the jobs in order, each slot and bucket once
--          plan: {"s": [slot numbers], "b": [bucket numbers]} (1-based places in the lists above; a slot with
--          `replicas` is maxUnavailablePerWorkload's: counted by unavailable_used, see parking.lua)
--          or {"reject": [rule, reason, message]} (a filter forbids it), {"drop": 1} (its job is gone),
--          {"wait": [seconds, rule, message]} (its facts are not known yet: look again after `seconds`)
--
-- Returns {"retry"} or, per job, three strings: outcome (admitted|deferred|forbidden|rejected|dropped|done|
-- closed), rule, message.
local p = KEYS[1]
local ttl = tonumber(ARGV[1])
local now = clock(ARGV[2])
local queued = ARGV[3] == '1'
local round = cjson.decode(ARGV[4])
local jobs = round.jobs
local count = #jobs
-- Each plan's slots and buckets, from the round's lists.
for _, entry in ipairs(jobs) do
  local plan = entry[3]
  if plan.s then
    plan.slots, plan.buckets = {}, {}
    for _, i in ipairs(plan.s) do table.insert(plan.slots, round.slots[i]) end
    for _, i in ipairs(plan.b) do table.insert(plan.buckets, round.buckets[i]) end
  end
end

if queued and count > 0 then
  local head = redis.call('ZRANGE', p .. K.queue, 0, count - 1)
  if #head ~= count then return {'retry'} end
  for i = 1, count do
    if job_of(head[i]) ~= jobs[i][1] then return {'retry'} end
  end
end

local out = {}
if redis.call('EXISTS', p .. K.marker) == 0 then
  for _ = 1, count do
    table.insert(out, 'closed'); table.insert(out, '')
    table.insert(out, 'the ledger is being rebuilt: nothing is admitted until it is')
  end
  return out
end

-- Reclaim a few slots whose jobs vanished without a release (bounded work per call).
local expired = redis.call('ZRANGEBYSCORE', p .. K.expiry, '-inf', now, 'LIMIT', 0, 16)
for _, gone in ipairs(expired) do
  local record = redis.call('HGET', p .. K.job .. gone, 'slots')
  if record then
    local keys = cjson.decode(record)
    leave(p, gone, keys)
    local claimed = redis.call('HGET', p .. K.job .. gone, 'pod')
    if claimed and redis.call('HGET', p .. K.claims, claimed) == gone then redis.call('HDEL', p .. K.claims, claimed) end
    freed(p, keys, now)
  end
  redis.call('DEL', p .. K.job .. gone)
  redis.call('ZREM', p .. K.expiry, gone)
end

-- What a job waiting on slot `key` is woken by: the plan's limits on that key (the smallest count limit, and
-- maxUnavailablePerWorkload's with its replica count).
local function remember(slots, key)
  local plain, unavailable = nil, nil
  for _, slot in ipairs(slots) do
    if slot[2] == key then
      local limit = tonumber(slot[3])
      if slot[5] then
        unavailable = string.format('%d %d', limit, tonumber(slot[5]))
      elseif plain == nil or limit < plain then
        plain = limit
      end
    end
  end
  redis.call('HSET', p .. K.limit, key, plain or 2147483647)
  if unavailable then
    redis.call('HSET', p .. K.unavailable, key, unavailable)
  else
    redis.call('HDEL', p .. K.unavailable, key)
  end
end

-- outcome, rule, message[, gate, due]
local function decide(job, pod, plan)
  if plan.drop then return 'dropped', 'dropped', 'the job is gone' end
  if plan.reject then return 'rejected', plan.reject[1], plan.reject[3] end
  if redis.call('EXISTS', p .. K.job .. job) == 1 then
    return 'admitted', 'admitted', 'already admitted'
  end
  if redis.call('SISMEMBER', p .. K.done, job) == 1 then
    -- Admitted once and released since: a job is arbitrated once, however often its events replay.
    return 'done', 'done', 'this job was admitted and has finished'
  end
  if plan.wait then return 'deferred', plan.wait[2], plan.wait[3], 'timer', now + tonumber(plan.wait[1]) end
  local holder = redis.call('HGET', p .. K.claims, pod)
  if holder then
    return 'forbidden', 'ActiveJob', 'another migration job (' .. holder .. ') is moving this pod'
  end
  for _, slot in ipairs(plan.slots) do
    local rule, key, limit, what = slot[1], slot[2], tonumber(slot[3]), slot[4]
    local members = p .. K.slots .. key
    if redis.call('SISMEMBER', members, job) == 0 then
      local used, other, grows = 0, 0, 1
      if slot[5] then
        used, other = unavailable_used(p, key, tonumber(slot[5]))
        what = string.format('%s (%d more unavailable)', what, other)
        -- A pod already missing from the Ready set is among the `other` replicas: moving it adds nothing.
        if other > 0 and redis.call('SISMEMBER', p .. K.ready .. key, pod) == 0 then grows = 0 end
      else
        -- Its own pod, marked evicted in the background while its job waited (an evacuation that asked for
        -- this job), is counted by the job from now on, not beside it.
        local evicting = p .. K.evicting .. key
        used = redis.call('SCARD', members) + redis.call('SCARD', evicting) - redis.call('SISMEMBER', evicting, pod)
      end
      if used + grows > limit then
        remember(plan.slots, key)
        return 'deferred', rule, string.format('deferred: %s %d/%d on %s', rule, used, math.max(limit, 0), what),
          'slot:' .. key
      end
    end
  end
  local fills = {}
  for i, bucket in ipairs(plan.buckets) do
    local rule, key, rate, burst, what = bucket[1], bucket[2], tonumber(bucket[3]), tonumber(bucket[4]), bucket[5]
    local state = redis.call('HMGET', p .. K.bucket .. key, 'tokens', 'ts')
    local tokens, ts = tonumber(state[1]), tonumber(state[2])
    if tokens == nil then tokens, ts = burst, now end
    local available = math.min(burst, tokens + math.max(0, now - ts) * rate)
    if available < 1 then
      redis.call('HSET', p .. K.bucketcfg, key, string.format('%.17g %d', rate, burst))
      local wait = (1 - available) / rate
      return 'deferred', rule, string.format('deferred: %s exhausted for %s (next token in %.2fs)', rule, what, wait),
        'bucket:' .. key, now + wait
    end
    fills[i] = available - 1
  end
  -- Everything holds: take it all.
  local keys, seen = {}, {}
  for _, slot in ipairs(plan.slots) do
    local key = slot[2]
    if not seen[key] then
      seen[key] = true
      table.insert(keys, key)
      redis.call('SADD', p .. K.slots .. key, job)
      redis.call('SREM', p .. K.evicting .. key, pod)
      if string.sub(key, 1, 9) == 'workload:' then track_gone(p, key, pod, job) end
      -- Keep the limits that waiters are woken by current (the facts behind them may have changed).
      if redis.call('EXISTS', p .. K.wait .. 'slot:' .. key) == 1 then remember(plan.slots, key) end
    end
  end
  for i, bucket in ipairs(plan.buckets) do
    redis.call('HSET', p .. K.bucket .. bucket[2], 'tokens', fills[i], 'ts', now)
  end
  redis.call('HSET', p .. K.claims, pod, job)
  redis.call('SADD', p .. K.done, job)
  redis.call('HSET', p .. K.job .. job, 'pod', pod, 'slots', cjson.encode(keys), 'admitted', now)
  -- How it moves, for whoever publishes the decision (a replica dying before it did loses nothing).
  if plan.surge then redis.call('HSET', p .. K.job .. job, 'surge', '1') end
  redis.call('ZADD', p .. K.expiry, now + ttl, job)
  return 'admitted', 'admitted', 'all limits hold'
end

for i = 1, count do
  local job, pod, plan = jobs[i][1], jobs[i][2], jobs[i][3]
  local outcome, rule, message, gate, due = decide(job, pod, plan)
  if queued then
    local member = redis.call('HGET', p .. K.queued, job)
    if outcome == 'deferred' and member then
      local from = redis.call('HGET', p .. K.wokefrom, job)
      if from then redis.call('HDEL', p .. K.wokefrom, job) end
      park(p, job, member, gate, due)
      if from and from ~= gate then pass_on(p, from, now) end
      if string.sub(gate, 1, 7) == 'bucket:' then redis.call('ZADD', p .. K.timers, 'LT', due, 'gate:' .. gate) end
    elseif outcome ~= 'deferred' and member then
      unqueue(p, job, now)
      redis.call('HDEL', p .. K.queued, job)
      if outcome == 'admitted' or outcome == 'forbidden' or outcome == 'rejected' then
        -- Off the queue, the outcome must still be told: it stays here until a replica has published it,
        -- so a replica dying between this script and its publish loses nothing.
        local reason = ''
        if plan.reject then reason = plan.reject[2] end
        redis.call('HSET', p .. K.announce, job, cjson.encode({outcome, rule, message, pod, reason, now}))
      end
    end
  end
  table.insert(out, outcome); table.insert(out, rule); table.insert(out, message); table.insert(out, gate or '')
end
return out
