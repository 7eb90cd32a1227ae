-- set_once: gives a count kept as a string its first value, as Redisson's
-- RSemaphore.trySetPermits and RCountDownLatch.trySetCount do; prepended to
-- semaphore/semaphore_try_set.lua and count_down_latch/latch_try_set.lua.
-- Returns  1  set, and `message` published on `channel` (`publish`: 'publish',
--             or 'spublish' on a Redis Cluster; absent: 'publish')
--          0  the key holds a value `readable` reads already: left alone
--         -1  the key holds something else: left alone
local function set_once(key, value, channel, message, publish, readable)
  local kind = redis.call('type', key).ok
  if kind ~= 'none' then
    if kind ~= 'string' or not readable(redis.call('get', key)) then
      return -1
    end
    return 0
  end
  redis.call('set', key, value)
  redis.call(publish or 'publish', channel, message)
  return 1
end
