-- release: drop one hold; the last hold deletes the lock and wakes waiters.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  channel (redisson_lock__channel:{NAME})
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, n}  the lock is deleted and '0' published; n subscriber connections got it
--          {0, 0}  one hold dropped, others remain
--         {-1, 0}  the owner does not hold the lock (expired, or another owner has it)
--         {-2, 0}  KEYS[1] exists but is not a hash (WRONGTYPE)
-- The common case (last hold) costs three calls: HGET, DEL, PUBLISH.
local publish = ARGV[4] or 'publish'
local count = redis.pcall('hget', KEYS[1], ARGV[3])
if type(count) == 'table' and count.err then
  return {-2, 0}
end
if not count then
  if redis.call('exists', KEYS[1]) == 0 then
    -- Nobody holds it: waiters may be parked on a lock that expired, wake them.
    redis.call(publish, ARGV[1], '0')
  end
  return {-1, 0}
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[3], -1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {0, 0}
end
redis.call('del', KEYS[1])
return {1, redis.call(publish, ARGV[1], '0')}
