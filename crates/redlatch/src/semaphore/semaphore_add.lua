-- semaphore_add: add (or, with a negative delta, take away) permits.
-- KEYS[1]  permit count (NAME)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  delta (may be negative)
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, count}  the new count (published when positive, to wake waiters)
--          {0, count}  refused: a negative delta would take the count below zero;
--                      count unchanged (a count already below zero, which
--                      Redisson's addPermits allows, takes positive deltas)
--         {-1, 0}      KEYS[1] holds something other than a decimal 64-bit integer
-- (integer: lib/checks.lua; give_back: lib/memory.lua)
local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
local count = 0
if kind ~= 'none' then
  count = kind == 'string' and integer(redis.call('get', KEYS[1]))
  if not count then
    return {-1, 0}
  end
end
local delta = tonumber(ARGV[2])
if delta < 0 and count + delta < 0 then
  return {0, count}
end
-- As a release: a count that is there takes no memory to change.
if kind == 'none' then
  count = redis.call('incrby', KEYS[1], delta)
else
  count = give_back('incrby', KEYS[1], delta)
end
if count > 0 then
  redis.call(publish, ARGV[1], count)
end
return {1, count}
