-- acquire: take the reentrant hash lock, or re-enter it as the same owner.
-- Layout compatible with Redisson's RLock: hash KEYS[1], field = owner -> hold count.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter (redisson_lock_token:{NAME}), never expires
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field (<client-uuid>:<owner>)
-- Returns {1, token}  acquired afresh; token = INCR of the counter
--         {2, token}  re-entered (hold count + 1); token = current counter value
--         {0, pttl}   held by another owner; pttl = its remaining lease (-1: no expiry)
--         {-1, 0}     KEYS[1] exists but is not a hash, or KEYS[2] is not an integer
--                     INCR accepts (WRONGTYPE); nothing is written
-- INCR fails on anything but a decimal 64-bit integer below the maximum:
-- the counter is checked before anything is written.
local function is_counter(key)
  local key_type = redis.call('type', key).ok
  if key_type == 'none' then return true end
  if key_type ~= 'string' then return false end
  local value = redis.call('get', key)
  local digits = string.match(value, '^%-?([1-9]%d*)$')
  if not digits then return value == '0' end
  if #digits ~= 19 then return #digits < 19 end
  if string.sub(value, 1, 1) == '-' then return digits <= '9223372036854775808' end
  return digits < '9223372036854775807'
end
local kind = redis.call('type', KEYS[1]).ok
if not is_counter(KEYS[2]) then
  return {-1, 0}
end
if kind == 'none' then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
if kind ~= 'hash' then
  return {-1, 0}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
