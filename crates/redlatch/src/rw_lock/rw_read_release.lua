-- rw_read_release: drop one read hold. The last hold of the last live reader
-- deletes the lock and wakes waiters.
-- KEYS[1]  lock hash (NAME)
-- ARGV[1]  channel (redisson_rwlock:{NAME})
-- ARGV[2]  read field
-- ARGV[3]  timeout key prefix of this field ({NAME}:<field>:rwlock_timeout)
-- ARGV[4]  timeout key base ({NAME}): other fields' keys are BASE:<field>:rwlock_timeout:<n>
-- ARGV[5]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  {1, n}   the lock is deleted and '0' published; n subscriber connections got it
--          {0, 0}   one hold dropped; this owner or others still hold the lock
--          {-1, 0}  the owner holds no read (publishes '0' if the key is gone)
--          {-2, 0}  KEYS[1] exists but is not a hash (WRONGTYPE), nothing written; or
--                   the owner's read hold count is not an integer: its field is removed,
--                   and the lock freed as below if no live reader remains
-- Readers whose every timeout key expired are dead (not renewed for a lease):
-- their fields are dropped, and the lock lives at least as long as the longest
-- live read (its lease is lengthened, never shortened: lib/lease.lua).
local publish = ARGV[5] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call(publish, ARGV[1], '0')
  return {-1, 0}
end
if kind ~= 'hash' then
  return {-2, 0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {-1, 0}
end
-- A count that is not an integer cannot be counted down: the field goes
-- (kept, it would hold the lock with no guard to give it back).
local corrupt = not integer(redis.call('hget', KEYS[1], ARGV[2]))
local done = {0, 0}
if corrupt then
  redis.call('hdel', KEYS[1], ARGV[2])
  done = {-2, 0}
else
  local n = give_back('hincrby', KEYS[1], ARGV[2], -1)
  if n <= 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
  end
  redis.call('del', ARGV[3] .. ':' .. (n + 1))
end
if mode == 'write' then
  -- The writer (this owner, downgrading) still holds it.
  return done
end
local longest = -2
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
  if field ~= 'mode' and field ~= TOKEN_FIELD then
    local count = tonumber(redis.call('hget', KEYS[1], field)) or 0
    local alive = -2
    for i = count, 1, -1 do
      local left = redis.call('pttl', ARGV[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
      if left == -1 or left > alive then alive = left end
      if alive == -1 then break end
    end
    if alive == -2 then
      redis.call('hdel', KEYS[1], field)
    elseif alive > longest then
      longest = alive
    end
  end
end
if redis.call('hlen', KEYS[1]) > 1 then
  if longest > 0 then
    lengthen(KEYS[1], longest)
  end
  return done
end
redis.call('del', KEYS[1])
local receivers = redis.call(publish, ARGV[1], '0')
if corrupt then return {-2, 0} end
return {1, receivers}
