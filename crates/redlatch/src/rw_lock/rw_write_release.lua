-- rw_write_release: drop one write hold. The last one deletes the lock, or,
-- when the same owner also reads (downgrade), leaves it in read mode; either
-- way waiters are woken.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  channel (redisson_rwlock:{NAME})
-- ARGV[2]  lease in milliseconds, re-applied while write holds remain: lengthened,
--          never shortened (lib/lease.lua)
-- ARGV[3]  write field
-- ARGV[4]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, n}   the write lock is gone (deleted, or read mode); '1' published to n
--                   (Redisson's read-unlock message: every waiter wakes, readers may all enter)
--          {0, 0}   one hold dropped, others remain
--          {-1, 0}  the owner does not hold the write lock (publishes '1' if the key is gone)
--          {-2, 0}  KEYS[1] exists but is not a hash (WRONGTYPE), nothing written; or
--                   the owner's write hold count is not an integer: its field is removed
--                   and the lock freed (or left in read mode) as for a last hold
local publish = ARGV[4] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call(publish, ARGV[1], '1')
  return {-1, 0}
end
if kind ~= 'hash' then
  return {-2, 0}
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write'
    or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return {-1, 0}
end
-- A count that is not an integer cannot be counted down: the hold goes as
-- a last one does (kept, it would hold the lock with no guard to give it back).
local holds = integer(redis.call('hget', KEYS[1], ARGV[3]))
if holds and holds > 1 then
  give_back('hincrby', KEYS[1], ARGV[3], -1)
  lengthen(KEYS[1], ARGV[2])
  return {0, 0}
end
redis.call('hdel', KEYS[1], ARGV[3], TOKEN_FIELD)
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local receivers = redis.call(publish, ARGV[1], '1')
if not holds then return {-2, 0} end
return {1, receivers}
