-- A job of a workload ends: may the Reservations it did not use go? (the tracker's Endings.cleanup)
-- KEYS[1]  the workload's jobs in flight past their eviction (set)
-- KEYS[2]  the workload's ended jobs whose untaken Reservations were kept (set)
-- ARGV[1]  the job that ended
-- Returns {0} while another job of the workload is in flight: the job's untaken room stays for a
-- sibling's replacement (it may have claimed a replacement in that sibling's room), and is remembered;
-- {1, kept...} when it was the last: its room goes, and with it the room kept by the jobs listed;
-- {2} for a job that never evicted: nothing of it to keep.
local was_open = redis.call('SREM', KEYS[1], ARGV[1]) == 1 or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1
if redis.call('SCARD', KEYS[1]) > 0 then
  if not was_open then return {2} end
  redis.call('SADD', KEYS[2], ARGV[1])
  return {0}
end
local out = {1}
for _, job in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if job ~= ARGV[1] then out[#out + 1] = job end
end
redis.call('DEL', KEYS[2])
return out
