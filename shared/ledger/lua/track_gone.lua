-- After a rebuild: for each job restored, whether its pod is among its workload's Ready pods (the sets were
-- refilled from the pod events first). Prepended with parking.lua.
-- KEYS[1] the ledger prefix; ARGV[1] JSON list of [job uid, pod uid, workload slot key]
local p = KEYS[1]
for _, held in ipairs(cjson.decode(ARGV[1])) do
  local job, pod, key = held[1], held[2], held[3]
  if redis.call('SISMEMBER', p .. K.slots .. key, job) == 1 then track_gone(p, key, pod, job) end
end
return 1
