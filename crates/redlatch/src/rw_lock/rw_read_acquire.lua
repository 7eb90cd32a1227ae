-- rw_read_acquire: take a read hold on a read-write lock, in the layout of
-- Redisson's RReadWriteLock. Readers share the lock; a writer excludes them.
-- New readers also wait while a writer waits (its claim in KEYS[3]), so a
-- stream of readers cannot starve writers; re-entries and a writer reading
-- (downgrade) never wait.
-- KEYS[1]  lock hash (NAME): field 'mode' = 'read' | 'write', holder fields -> hold count
-- KEYS[2]  fencing counter, never expires (as in acquire.lua)
-- KEYS[3]  waiting writers (redlatch_rwlock_writers:{NAME}): zset write field -> claim
--          deadline, server time in ms
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  read field (<client-uuid>:<owner>)
-- ARGV[3]  the same owner's write field (<client-uuid>:<owner>:write)
-- ARGV[4]  timeout key prefix of this field ({NAME}:<client-uuid>:<owner>:rwlock_timeout);
--          the n-th read hold of the field is the key PREFIX:n, with PEXPIRE = lease
--          (a hold's timeout key and the hash are lengthened, never shortened:
--          lib/lease.lua)
-- ARGV[5]  '1': re-enter only (never take a first hold)
-- Returns {1, token}  first read hold of this owner; token = the counter's next (lib/checks.lua),
--                     kept as the value of its timeout key PREFIX:1
--         {2, token}  one more read hold of this owner; token = its first hold's
--         {0, wait}   blocked by a writer (holding or waiting) or a plain lock:
--                     wait = ms until worth another try (-1: the holder has no expiry)
--         {-1, 0}     a value the lock cannot use: a key holds another type, the owner's
--                     hold count is not an integer, the counter cannot give a token
--                     (is_counter: lib/checks.lua), or a re-entered hold's kept token
--                     (its first timeout key) is not one; nothing is written
--         {-3, 0}     re-enter only, and this owner holds no read
if redis.replicate_commands then redis.replicate_commands() end
local function kind(key) return redis.call('type', key).ok end
-- The counter and the hold count are checked before anything is written
-- (is_counter, is_hold_count: lib/checks.lua).
local lock_kind, writers_kind = kind(KEYS[1]), kind(KEYS[3])
if (lock_kind ~= 'none' and lock_kind ~= 'hash')
    or (writers_kind ~= 'none' and writers_kind ~= 'zset')
    or not is_counter(KEYS[2])
    or (lock_kind == 'hash' and not is_hold_count(redis.call('hget', KEYS[1], ARGV[2]))) then
  return {-1, 0}
end
local mode = false
if lock_kind == 'hash' then
  mode = redis.call('hget', KEYS[1], 'mode')
  if not mode then
    -- A hash without a mode: a plain lock holds this name.
    if ARGV[5] == '1' then return {-3, 0} end
    return {0, redis.call('pttl', KEYS[1])}
  end
end
local reading = mode and redis.call('hexists', KEYS[1], ARGV[2]) == 1
if ARGV[5] == '1' and not reading then
  return {-3, 0}
end
-- A re-entry's token, read before anything is written: its first hold's
-- (the value of PREFIX:1; without that key, the counter's). One the lock
-- cannot use (counter_value, lib/checks.lua) refuses the re-entry.
local kept = false
if reading then
  local first = ARGV[4] .. ':1'
  local first_kind = kind(first)
  if first_kind == 'string' then
    kept = counter_value(redis.call('get', first))
  elseif first_kind == 'none' then
    kept = counter_value(redis.call('get', KEYS[2]))
  else
    kept = nil
  end
  if not kept then return {-1, 0} end
end
local writing = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if not reading and not writing then
  if mode == 'write' then
    return {0, redis.call('pttl', KEYS[1])}
  end
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  local writer = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
  if writer[1] then
    -- Queue behind the waiting writer; try again when its claim would run out.
    local wait = tonumber(writer[2]) - now
    if mode == 'read' then
      local pttl = redis.call('pttl', KEYS[1])
      if pttl >= 0 and pttl < wait then wait = pttl end
    end
    return {0, wait}
  end
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
local token = n == 1 and next_token(KEYS[2])
-- The owner's first read hold's timeout key keeps its token, for its
-- re-entries (Redisson reads only these keys' expiries; its own say '1').
local value = token and string.format('%.0f', token) or 1
local timeout = ARGV[4] .. ':' .. n
local left = redis.call('pttl', timeout)
if left < tonumber(ARGV[1]) then
  redis.call('set', timeout, value, 'px', ARGV[1])
elseif token then
  redis.call('set', timeout, value, 'px', left)
end
lengthen(KEYS[1], ARGV[1])
if token then
  return {1, token}
end
return {2, kept or 0}
