-- reenter: add one hold for an owner that already holds the lock; never acquires afresh.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- Returns  new hold count, 0 when the owner does not hold the lock, -1 on WRONGTYPE
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return 0
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return count
