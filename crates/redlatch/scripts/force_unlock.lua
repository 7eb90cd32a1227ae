-- force_unlock: delete the lock whoever holds it and wake waiters.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter (as in acquire.lua), only read
-- ARGV[1]  channel (redisson_lock__channel:{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, token}  a lock was deleted; token = the counter then: every hold
--                      it took down was acquired with this token or a lower one,
--                      a later acquisition gets a higher one (-1: no readable counter)
--          {0, 0}      nothing held it
--          {-1, 0}     KEYS[1] is not a hash (left alone)
local publish = ARGV[2] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call(publish, ARGV[1], '0')
  return {0, 0}
end
if kind ~= 'hash' then
  return {-1, 0}
end
local counter = redis.pcall('get', KEYS[2])
local token = type(counter) == 'string' and tonumber(counter) or nil
redis.call('del', KEYS[1])
redis.call(publish, ARGV[1], '0')
if token and token >= 0 and token == math.floor(token) then
  return {1, counter}
end
return {1, -1}
