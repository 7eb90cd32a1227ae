-- permit_available: reclaim expired permits, then read the available count.
-- KEYS[1]  permit count (NAME)
-- KEYS[2]  expiries ({NAME}:timeout)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, count, held}  available permits (may be negative, as Redisson
--                           allows), and permits held (unexpired)
--          {-1, 0, 0}        a key holds a value of the wrong type, or the count
--                            is not a decimal 64-bit integer
-- (integer: lib/checks.lua)
local publish = ARGV[2] or 'publish'
local count_kind = redis.call('type', KEYS[1]).ok
local set_kind = redis.call('type', KEYS[2]).ok
if (count_kind ~= 'none' and count_kind ~= 'string') or (set_kind ~= 'none' and set_kind ~= 'zset') then
  return {-1, 0, 0}
end
local count = 0
if count_kind == 'string' then
  count = integer(redis.call('get', KEYS[1]))
  if not count then
    return {-1, 0, 0}
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  count = redis.call('incrby', KEYS[1], #expired)
  redis.call(publish, ARGV[1], count)
end
return {1, count, redis.call('zcard', KEYS[2])}
