-- semaphore_release: give permits back and wake waiters.
-- KEYS[1]  permit count (NAME)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  permits given back (>= 1)
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  count  the new number of available permits (also published)
--          -1     KEYS[1] holds something other than a decimal 64-bit integer (left alone)
-- (integer: lib/checks.lua; give_back: lib/memory.lua)
local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not integer(redis.call('get', KEYS[1]))) then
  return -1
end
-- A count that is there takes no memory to raise; a missing one is written
-- as a new count is (refused for memory by EVAL on a server out of it).
local count
if kind == 'none' then
  count = redis.call('incrby', KEYS[1], ARGV[2])
else
  count = give_back('incrby', KEYS[1], ARGV[2])
end
redis.call(publish, ARGV[1], count)
return count
