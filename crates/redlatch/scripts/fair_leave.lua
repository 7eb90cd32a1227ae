-- fair_leave: a waiter gives up its place in line (cancelled, or timed out).
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  the line (redisson_lock_queue:{NAME})
-- KEYS[3]  place deadlines (redisson_lock_timeout:{NAME})
-- ARGV[1]  waiter channel prefix (redisson_lock__channel:{NAME})
-- ARGV[2]  owner field
-- Returns  1 the owner left the line, 0 it was not in it.
-- When the lock is free, the (new) first waiter is woken: it may have been
-- waiting behind the one that left.
local removed = redis.call('lrem', KEYS[2], 0, ARGV[2])
redis.call('zrem', KEYS[3], ARGV[2])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
  local first = redis.call('lindex', KEYS[2], 0)
  if first then
    redis.call('publish', ARGV[1] .. ':' .. first, '0')
  end
end
if removed > 0 then return 1 end
return 0
