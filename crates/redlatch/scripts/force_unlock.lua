-- force_unlock: delete the lock whoever holds it and wake waiters.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  channel (redisson_lock__channel:{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1 a lock was deleted, 0 nothing held it, -1 KEYS[1] is not a hash (left alone)
local publish = ARGV[2] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call(publish, ARGV[1], '0')
  return 0
end
if kind ~= 'hash' then
  return -1
end
redis.call('del', KEYS[1])
redis.call(publish, ARGV[1], '0')
return 1
