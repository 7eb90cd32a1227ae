-- acquire: take the reentrant hash lock, or re-enter it as the same owner.
-- Layout compatible with Redisson's RLock: hash KEYS[1], field = owner -> hold count.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter (redisson_lock_token:{NAME}), never expires
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field (<client-uuid>:<owner>)
-- Returns {1, token}  acquired afresh; token = INCR of the counter
--         {2, token}  re-entered (hold count + 1); token = current counter value
--         {0, pttl}   held by another owner; pttl = its remaining lease (-1: no expiry)
--         {-1, 0}     KEYS[1] exists but is not a hash, or the counter is not an
--                     integer INCR accepts (WRONGTYPE); nothing is written
-- Check first, write last: the counter is the one thing that can fail, so it
-- is read (re-entry) or incremented (fresh acquisition) before the lock is
-- written. A busy lock is answered without looking at the counter.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  local token = redis.pcall('incr', KEYS[2])
  if type(token) == 'table' then
    -- The counter's own faults (not an integer, overflow, another type) are
    -- WRONGTYPE; anything else (READONLY on a demoted master, OOM) goes back
    -- to the caller as the error it is.
    local err = token.err or ''
    if string.find(err, '^WRONGTYPE') or string.find(err, 'not an integer')
        or string.find(err, 'overflow') then
      return {-1, 0}
    end
    return token
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token}
end
if kind ~= 'hash' then
  return {-1, 0}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local raw = redis.pcall('get', KEYS[2])
  if type(raw) == 'table' or (raw and not string.match(raw, '^%-?%d+$')) then
    return {-1, 0}
  end
  local token = tonumber(raw or '0')
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, token}
end
return {0, redis.call('pttl', KEYS[1])}
