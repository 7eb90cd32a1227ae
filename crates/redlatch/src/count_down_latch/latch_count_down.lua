-- latch_count_down: count a count-down latch down by one; the call that
-- takes it to zero deletes it and wakes its waiters.
-- Layout compatible with Redisson's RCountDownLatch: string KEYS[1] = the count.
-- KEYS[1]  count (NAME)
-- ARGV[1]  channel (redisson_countdownlatch__channel__{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, left}  left: the count now, as a decimal string ('0': open). A
--                     count of 1 is deleted and `0` (Redisson's zero-count
--                     message) published; a count at or below zero (Redisson's
--                     trySetCount takes any long) is deleted without a message,
--                     and no count (an open latch) stays so, nothing written:
--                     Redisson's DECR, DEL at or below zero, PUBLISH at zero
--         {-1, ''}    KEYS[1] holds something other than a decimal 64-bit
--                     integer: left alone
-- (integer: lib/checks.lua; give_back: lib/memory.lua)
local publish = ARGV[2] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {1, '0'}
end
local count = kind == 'string' and integer(redis.call('get', KEYS[1]))
if not count then
  return {-1, ''}
end
if count <= 1 then
  redis.call('del', KEYS[1])
  if count == 1 then
    redis.call(publish, ARGV[1], 0)
  end
  return {1, '0'}
end
-- A count that is there takes no memory to lower.
give_back('decr', KEYS[1])
-- Read back as text: a count above 2^53 stays exact (Lua's numbers would round it).
return {1, redis.call('get', KEYS[1])}
