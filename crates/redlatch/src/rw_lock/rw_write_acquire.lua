-- rw_write_acquire: take the write hold on a read-write lock (Redisson's
-- RReadWriteLock layout), re-enter it, or claim a place as a waiting writer.
-- KEYS[1]  lock hash (NAME): field 'mode' = 'read' | 'write', holder fields -> hold count
-- KEYS[2]  fencing counter, never expires (as in acquire.lua)
-- KEYS[3]  waiting writers (redlatch_rwlock_writers:{NAME}): zset write field -> claim
--          deadline, server time in ms; new readers wait while a claim is live
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  write field (<client-uuid>:<owner>:write)
-- ARGV[3]  claim lease in ms: the claim lapses unless this writer tries again within
--          it; 0 = a single try that claims nothing
-- ARGV[4]  '1': re-enter only (never take a first hold)
-- ARGV[5]  the same owner's read field (<client-uuid>:<owner>)
-- Returns {1, token}  acquired afresh; token = the counter's next (lib/checks.lua),
--                     kept in the hash (TOKEN_FIELD) while the write hold lasts; lease set
--         {2, token}  re-entered (hold count + 1); token = the hold's;
--                     the lease is lengthened, never shortened (lib/lease.lua)
--         {0, pttl}   held by readers, another writer or a plain lock: its remaining
--                     lease (-1: no expiry)
--         {-1, 0}     a value the lock cannot use: a key holds another type, the owner's
--                     hold count is not an integer, the counter cannot give a token
--                     (is_counter: lib/checks.lua), or a re-entered hold's kept token
--                     is not one; nothing is written
--         {-3, 0}     re-enter only, and this owner does not hold the write lock
--         {-4, 0}     this owner reads the lock: it would wait for itself (no upgrade)
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
if lock_kind == 'hash' and redis.call('hget', KEYS[1], 'mode') == 'write'
    and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- Read before the hold count is raised: a kept token the lock cannot use
  -- (hold_token, lib/checks.lua) refuses the re-entry unwritten.
  local kept = hold_token(KEYS[1], KEYS[2])
  if not kept then
    return {-1, 0}
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  lengthen(KEYS[1], ARGV[1])
  return {2, kept}
end
if ARGV[4] == '1' then
  return {-3, 0}
end
if lock_kind == 'hash' and redis.call('hexists', KEYS[1], ARGV[5]) == 1 then
  return {-4, 0}
end
if lock_kind == 'none' then
  local token = next_token(KEYS[2])
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1,
    TOKEN_FIELD, kept_token(token))
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[3], ARGV[2])
  return {1, token}
end
local claim = tonumber(ARGV[3])
if claim > 0 then
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  -- Out of memory the claim is skipped: the lock is busy all the same.
  if unless_out_of_memory('zadd', KEYS[3], now + claim, ARGV[2]) then
    -- The set disappears by itself once every claim in it has lapsed.
    local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
    redis.call('pexpire', KEYS[3], math.max(tonumber(last[2]) - now, claim))
  end
end
return {0, redis.call('pttl', KEYS[1])}
