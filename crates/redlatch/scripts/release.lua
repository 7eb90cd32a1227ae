-- release: drop one hold; the last hold deletes the lock and wakes waiters.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  channel (redisson_lock__channel:{NAME})
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  owner field
-- Returns  1 the lock is deleted and '0' published on the channel
--          0 one hold dropped, others remain
--         -1 the owner does not hold the lock (expired, or another owner has it)
--         -2 KEYS[1] exists but is not a hash (WRONGTYPE)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  -- Nobody holds it: waiters may be parked on a lock that expired, wake them.
  redis.call('publish', ARGV[1], '0')
  return -1
end
if kind ~= 'hash' then
  return -2
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return -1
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], '0')
return 1
