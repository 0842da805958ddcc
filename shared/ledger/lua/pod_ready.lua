-- Keep a workload's set of Ready pods (<p>:ready:<slot key>, pod uids), which maxUnavailablePerWorkload counts
-- from, in step with the pod events: each pod's last applied state is "<resourceVersion> <uid> <slot key>"
-- in <p>:pod:<namespace/name>, and an older event changes nothing, so replicas applying events in any order
-- converge. The same version again is applied again (a replay after Redis lost the sets refills them).
-- When a set changes, the jobs waiting on that workload's slots are looked at. Prepended with parking.lua and
-- versions.lua.
-- KEYS[1] the ledger prefix; ARGV[1] namespace/name; ARGV[2] resourceVersion; ARGV[3] uid; ARGV[4] "1" Ready,
-- "0" not (or deleted); ARGV[5] the workload's slot key ("" for a pod of none); ARGV[6] "1" deleted
local p, ident, rv, uid, ready, key = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5]
local state = p .. K.pod .. ident
local stored = redis.call('GET', state)
local moves = {}  -- {slot key, pod uid} whose Ready membership changed
if stored then
  local old_rv, old_uid, old_key = string.match(stored, '^(%S+) (%S*) ?(%S*)$')
  if compare_versions(rv, old_rv) < 0 then return 0 end
  if old_key ~= '' and (old_uid ~= uid or old_key ~= key) then  -- the name now holds another pod
    if redis.call('SREM', p .. K.ready .. old_key, old_uid) == 1 then table.insert(moves, {old_key, old_uid}) end
  end
end
if ARGV[6] == '1' then
  redis.call('SET', state, rv .. ' ' .. uid .. ' ' .. key, 'EX', 3600)  -- a tombstone, as for facts
else
  redis.call('SET', state, rv .. ' ' .. uid .. ' ' .. key)
end
if key ~= '' then
  local set = p .. K.ready .. key
  local moved = ready and redis.call('SADD', set, uid) or redis.call('SREM', set, uid)
  if moved == 1 then table.insert(moves, {key, uid}) end
end
local woken = {}
for _, move in ipairs(moves) do
  local slot, pod = move[1], move[2]
  local job = redis.call('HGET', p .. K.claims, pod)  -- a job in flight for this pod: gone or not
  if job and redis.call('SISMEMBER', p .. K.slots .. slot, job) == 1 then track_gone(p, slot, pod, job) end
  if not woken[slot] then
    woken[slot] = true
    pass_on(p, 'slot:' .. slot, clock(nil))
  end
end
return 1
