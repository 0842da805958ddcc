-- Record whether a pod is being evicted in the background (KEP-1397) in the sets its limits count.
-- A pod a Podherd job already holds is counted through that job, never twice. Prepended with parking.lua.
-- KEYS[1] the ledger prefix; ARGV[1] pod uid; ARGV[2] "1" (in progress) or "0"; ARGV[3] JSON list of slot keys
local p, pod, on = KEYS[1], ARGV[1], ARGV[2] == '1'
local keys = cjson.decode(ARGV[3])
local claimed = redis.call('HEXISTS', p .. K.claims, pod) == 1
local changed = 0
local now = nil
for _, key in ipairs(keys) do
  if on and not claimed then
    changed = changed + redis.call('SADD', p .. K.evicting .. key, pod)
  elseif redis.call('SREM', p .. K.evicting .. key, pod) == 1 then
    changed = changed + 1
    now = now or clock(nil)
    pass_on(p, 'slot:' .. key, now)
  end
end
return changed
