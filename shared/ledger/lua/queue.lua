-- Queue operations. Prepended with parking.lua.
-- KEYS[1] the ledger prefix; ARGV[1] the operation:
--   "enqueue" job member: queue (or re-rank) a pending job; a parked job returns to the ready queue
--                         (its facts changed: it is looked at again). Returns 1.
--   "dequeue" job...:     the jobs left (deleted, aborted, paused, decided elsewhere). Returns how many were
--                         pending.
--   "tick" now max:       fire due timers (at most `max`); returns {fired, seconds to the next timer or -1}
--   "wake" gate...:       the facts behind these gates' limits changed: wake each one's best waiter,
--                         room or not (its evaluation records the new limit; pass-on does the rest).
--   "sweep" cursor max:   the same for up to `max` gates with waiters (the safety net at the arbitration
--                         interval, for room no event announced), but a token bucket's waiter only when a
--                         token is there (else its timer is set); returns the next cursor.
local p, op = KEYS[1], ARGV[1]
if op == 'enqueue' then
  local job, member = ARGV[2], ARGV[3]
  unqueue(p, job, clock(nil))
  redis.call('ZADD', p .. K.queue, 0, member)
  redis.call('HSET', p .. K.queued, job, member)
  return 1
elseif op == 'dequeue' then
  local now, left = clock(nil), 0
  for i = 2, #ARGV do
    if unqueue(p, ARGV[i], now) then
      redis.call('HDEL', p .. K.queued, ARGV[i])
      left = left + 1
    end
  end
  return left
elseif op == 'tick' then
  local now = clock(ARGV[2])
  local fired = fire_timers(p, now, tonumber(ARGV[3]))
  local next_timer = redis.call('ZRANGE', p .. K.timers, 0, 0, 'WITHSCORES')
  local wait = -1
  if #next_timer == 2 then wait = math.max(0, tonumber(next_timer[2]) - now) end
  return {fired, tostring(wait)}
elseif op == 'wake' then
  local woken = 0
  for i = 2, #ARGV do
    if wake(p, ARGV[i]) then woken = woken + 1 end
  end
  return woken
elseif op == 'sweep' then
  local scan = redis.call('SSCAN', p .. K.gates, ARGV[2], 'COUNT', ARGV[3])
  local now = clock(nil)
  for _, gate in ipairs(scan[2]) do
    -- A token bucket's room comes with time alone, and its timer wakes the waiter when it does.
    if string.sub(gate, 1, 7) == 'bucket:' then pass_on(p, gate, now) else wake(p, gate) end
  end
  return scan[1]
end
return redis.error_reply('unknown queue operation ' .. tostring(op))
