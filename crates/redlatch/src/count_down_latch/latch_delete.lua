-- latch_delete: delete a count-down latch, which opens it.
-- KEYS[1]  count (NAME)
-- ARGV[1]  channel (redisson_countdownlatch__channel__{NAME})
-- ARGV[2]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1  deleted, and `0` (the zero-count message) published: every waiter,
--             redlatch's or Redisson's, reads the count again and finds none
--             (Redisson's own delete publishes `1`, on which its waiters keep
--             waiting for a zero message)
--          0  no latch: nothing written
--         -1  KEYS[1] holds something other than a decimal 64-bit integer
--             (some other kind's key): left alone
-- (integer: lib/checks.lua)
local publish = ARGV[2] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'string' or not integer(redis.call('get', KEYS[1])) then
  return -1
end
redis.call('del', KEYS[1])
redis.call(publish, ARGV[1], 0)
return 1
