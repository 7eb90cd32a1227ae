-- semaphore_try_set: set the number of permits of a semaphore that has none yet.
-- Layout compatible with Redisson's RSemaphore: string KEYS[1] = available permits.
-- KEYS[1]  permit count (NAME)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  permits to set
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1  set, and the count published on the channel
--          0  the semaphore already had a count: left alone
--         -1  KEYS[1] holds something other than an integer
local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' then
  if kind ~= 'string' or not tonumber(redis.call('get', KEYS[1])) then
    return -1
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(publish, ARGV[1], ARGV[2])
return 1
