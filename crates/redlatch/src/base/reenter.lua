-- reenter: add one hold for an owner that already holds the lock; never acquires afresh.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  lease in milliseconds: the lock's lease is lengthened to it, never
--          shortened (lib/lease.lua)
-- ARGV[2]  owner field
-- Returns  new hold count, 0 when the owner does not hold the lock, -1 when the
--          key is not a hash or the owner's hold count is not an integer
--          (nothing written)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
local count = redis.call('hget', KEYS[1], ARGV[2])
if not count then
  return 0
end
if not is_hold_count(count) then
  return -1
end
count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
lengthen(KEYS[1], ARGV[1])
return count
