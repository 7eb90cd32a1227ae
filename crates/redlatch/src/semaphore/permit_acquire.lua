-- permit_acquire: reclaim expired permits, then take one with an id and a lease.
-- Layout compatible with Redisson's RPermitExpirableSemaphore: string KEYS[1] =
-- available permits, sorted set KEYS[2] = permit id -> expiry (ms since the epoch).
-- Expiries use the server's clock (TIME), so client clocks do not matter.
-- KEYS[1]  permit count (NAME)
-- KEYS[2]  expiries ({NAME}:timeout)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  permit id: its 16 raw bytes, as Redisson stores ids
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, left}     taken; left = permits still free
--          {0, wait}     none available; wait = ms until the earliest held permit
--                        expires (-1: no permit is held)
--         {-1, 0}        a key holds a value of the wrong type, or the count is not an
--                        integer; nothing is written
local publish = ARGV[4] or 'publish'
-- DECRBY and INCRBY fail on anything but a decimal 64-bit integer: the
-- count is checked before anything is written.
-- (integer: lib/checks.lua)
local count_kind = redis.call('type', KEYS[1]).ok
local set_kind = redis.call('type', KEYS[2]).ok
if (count_kind ~= 'none' and count_kind ~= 'string') or (set_kind ~= 'none' and set_kind ~= 'zset') then
  return {-1, 0}
end
local count = 0
if count_kind == 'string' then
  count = integer(redis.call('get', KEYS[1]))
  if not count then
    return {-1, 0}
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Permits of holders that stopped renewing come back first.
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  count = redis.call('incrby', KEYS[1], #expired)
  redis.call(publish, ARGV[1], count)
end
if count >= 1 then
  local expiry = now + tonumber(ARGV[3])
  local left = redis.call('decr', KEYS[1])
  redis.call('zadd', KEYS[2], string.format('%d', expiry), ARGV[2])
  return {1, left}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
  return {0, math.max(tonumber(first[2]) - now, 0)}
end
return {0, -1}
