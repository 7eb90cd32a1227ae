-- latch_try_set: give a count-down latch its count, if it has none.
-- Layout compatible with Redisson's RCountDownLatch: string KEYS[1] = the count.
-- KEYS[1]  count (NAME)
-- ARGV[1]  channel (redisson_countdownlatch__channel__{NAME})
-- ARGV[2]  the count (>= 1)
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1  set, and `1` (Redisson's new-count message) published on the channel
--          0  the latch has a count already (any integer, as Redisson's EXISTS
--             check): left alone
--         -1  KEYS[1] holds something other than a decimal 64-bit integer: left alone
-- (integer: lib/checks.lua)
local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' then
  if kind ~= 'string' or not integer(redis.call('get', KEYS[1])) then
    return -1
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(publish, ARGV[1], 1)
return 1
