-- semaphore_release: give permits back and wake waiters.
-- KEYS[1]  permit count (NAME)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  permits given back (>= 1)
-- Returns  count  the new number of available permits (also published)
--          -1     KEYS[1] holds something other than an integer (left alone)
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
  return -1
end
local count = redis.call('incrby', KEYS[1], ARGV[2])
redis.call('publish', ARGV[1], count)
return count
