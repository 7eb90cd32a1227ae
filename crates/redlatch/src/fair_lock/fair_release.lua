-- fair_release: drop one hold of the fair lock; the last hold deletes the lock
-- and wakes the waiter first in line (only that one), as Redisson's unlock
-- does; a redlatch waiter that left its terms is handed the lock instead
-- (hand_to, lib/fair_line.lua): it holds it without another call.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  the line (redisson_lock_queue:{NAME})
-- KEYS[3]  deadlines (redisson_lock_timeout:{NAME})
-- KEYS[4]  signs of life (redlatch_fair_alive:{NAME})
-- KEYS[5]  hand-off terms (redlatch_fair_terms:{NAME})
-- KEYS[6]  fencing counter (as in fair_acquire.lua)
-- ARGV[1]  waiter channel prefix (redisson_lock__channel:{NAME})
-- ARGV[2]  lease in milliseconds, re-applied while holds remain: lengthened, never
--          shortened (lib/lease.lua)
-- ARGV[3]  owner field
-- ARGV[4]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, n}   the lock is deleted (and maybe handed over); the first waiter
--          was sent '0' or its token, n receivers
--          {0, 0}   one hold dropped, others remain
--          {-1, 0}  the owner does not hold the lock (the first waiter is woken if it is free)
--          {-2, 0}  KEYS[1] exists but is not a hash (WRONGTYPE), nothing written; or the
--                   owner's hold count is not an integer: its field is removed (the last
--                   field: the lock is deleted and the first waiter woken, as for a last hold)
local publish = ARGV[4] or 'publish'
if redis.replicate_commands then redis.replicate_commands() end
local keys = {lock = KEYS[1], line = KEYS[2], deadlines = KEYS[3], alive = KEYS[4],
  terms = KEYS[5], counter = KEYS[6]}
local function wake_first()
  local head = drop_dead(KEYS[2], KEYS[3], KEYS[4], KEYS[5], server_now())
  if not head then return 0 end
  local handed = hand_to(keys, head, ARGV[1], publish)
  if handed then return handed end
  return redis.call(publish, ARGV[1] .. ':' .. head, '0')
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
local holds = integer(count)
if not holds then
  -- Kept, the field would hold the lock with no guard to give it back.
  redis.call('hdel', KEYS[1], ARGV[3], TOKEN_FIELD, WAITER_FIELD)
  if redis.call('exists', KEYS[1]) == 0 then
    wake_first()
  end
  return {-2, 0}
end
if holds > 1 then
  give_back('hincrby', KEYS[1], ARGV[3], -1)
  lengthen(KEYS[1], ARGV[2])
  return {0, 0}
end
redis.call('del', KEYS[1])
return {1, wake_first()}
