-- force_unlock: delete the lock whoever holds it and wake waiters.
-- KEYS[1]  lock hash (NAME), or a token lock's string (ARGV[3])
-- KEYS[2]  fencing counter (as in acquire.lua), only read
-- ARGV[1]  channel (redisson_lock__channel:{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- ARGV[3]  the type of the lock's key: 'hash' (absent: 'hash'), or 'string' for
--          a token lock, whose waiters learn of the delete from the key itself
--          (tracking, or their next look): nothing is published for it
-- Returns  {1, token}  a lock was deleted; token = the counter then: every hold
--                      it took down was acquired with this token or a lower one,
--                      a later acquisition gets a higher one (-1: no readable counter)
--          {1, value}  with ARGV[3] 'string': the token lock deleted, and the
--                      token it held (so the holder alone is marked lost)
--          {0, 0}      nothing held it
--          {-1, 0}     KEYS[1] is not of that type (left alone)
local publish = ARGV[2] or 'publish'
local wanted = ARGV[3] or 'hash'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  if wanted == 'hash' then redis.call(publish, ARGV[1], '0') end
  return {0, 0}
end
if kind ~= wanted then
  return {-1, 0}
end
if wanted == 'string' then
  local value = redis.call('get', KEYS[1])
  redis.call('del', KEYS[1])
  return {1, value}
end
local counter = redis.pcall('get', KEYS[2])
local token = type(counter) == 'string' and tonumber(counter) or nil
redis.call('del', KEYS[1])
redis.call(publish, ARGV[1], '0')
if token and token >= 0 and token == math.floor(token) then
  return {1, counter}
end
return {1, -1}
