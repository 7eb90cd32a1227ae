-- fair_release: drop one hold of the fair lock; the last hold deletes the lock
-- and wakes the waiter first in line (only that one).
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  the line (redisson_lock_queue:{NAME})
-- KEYS[3]  place deadlines (redisson_lock_timeout:{NAME})
-- ARGV[1]  waiter channel prefix (redisson_lock__channel:{NAME})
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  owner field
-- Returns  {1, n}   the lock is deleted; '0' published to the first waiter, n receivers
--          {0, 0}   one hold dropped, others remain
--          {-1, 0}  the owner does not hold the lock (the first waiter is woken if it is free)
--          {-2, 0}  KEYS[1] exists but is not a hash (WRONGTYPE)
if redis.replicate_commands then redis.replicate_commands() end
local function wake_first()
  -- Waiters whose place ran out are dead: skip them.
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then return 0 end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then
      return redis.call('publish', ARGV[1] .. ':' .. head, '0')
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
  end
end
local count = redis.pcall('hget', KEYS[1], ARGV[3])
if type(count) == 'table' and count.err then
  return {-2, 0}
end
if not count then
  if redis.call('exists', KEYS[1]) == 0 then
    wake_first()
  end
  return {-1, 0}
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[3], -1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {0, 0}
end
redis.call('del', KEYS[1])
return {1, wake_first()}
