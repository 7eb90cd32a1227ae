-- fair_acquire: take the fair lock when it is free and this owner is first in
-- line (or nobody waits), re-enter it, or take or keep a place in line.
-- Layout of Redisson's RFairLock; the lock hash is the reentrant lock's.
-- KEYS[1]  lock hash (NAME): field = owner -> hold count
-- KEYS[2]  the line (redisson_lock_queue:{NAME}): list of owner fields, oldest first
-- KEYS[3]  place deadlines (redisson_lock_timeout:{NAME}): zset owner -> server time, ms
-- KEYS[4]  fencing counter (redisson_lock_token:{NAME}), never expires
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field (<client-uuid>:<owner>)
-- ARGV[3]  place lease in ms: the place is dropped unless this owner tries again
--          within it; 0 = a single try that does not join the line
-- ARGV[4]  waiter channel prefix (redisson_lock__channel:{NAME}); the waiter with
--          owner field F listens on PREFIX:F
-- ARGV[5]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns {1, token}        acquired afresh; token = INCR of the counter
--         {2, token}        re-entered (hold count + 1); token = current counter value
--         {0, pttl, first}  not acquired: pttl = the holder's remaining lease (-1: no
--                           expiry; 0: free, but another waiter is first, and was woken);
--                           first = 1 when this owner is first in line
--         {-1, 0, 0}        a key holds another type, or the counter is not an integer
--                           INCR accepts (WRONGTYPE); nothing is written
-- Waiters whose place ran out (they stopped trying: dead) are dropped from the front.
local publish = ARGV[5] or 'publish'
if redis.replicate_commands then redis.replicate_commands() end
local function kind(key) return redis.call('type', key).ok end
-- The counter is checked before anything is written (is_counter: lib/checks.lua).
local lock_kind, line_kind, places_kind = kind(KEYS[1]), kind(KEYS[2]), kind(KEYS[3])
if (lock_kind ~= 'none' and lock_kind ~= 'hash')
    or (line_kind ~= 'none' and line_kind ~= 'list')
    or (places_kind ~= 'none' and places_kind ~= 'zset')
    or not is_counter(KEYS[4]) then
  return {-1, 0, 0}
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline and deadline > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end
local first = redis.call('lindex', KEYS[2], 0)
if lock_kind == 'none' then
  if not first or first == ARGV[2] then
    if first then
      redis.call('lpop', KEYS[2])
      redis.call('zrem', KEYS[3], ARGV[2])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[4])}
  end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, tonumber(redis.call('get', KEYS[4]) or '0')}
end
local place = tonumber(ARGV[3])
if place > 0 then
  -- Join at the back, or push our own deadline forward: we are alive.
  if redis.call('zadd', KEYS[3], now + place, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  first = first or ARGV[2]
  -- The line disappears by itself once every place in it has run out.
  local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  local keep = math.max(tonumber(last[2]) - now, place)
  redis.call('pexpire', KEYS[2], keep)
  redis.call('pexpire', KEYS[3], keep)
end
local pttl = 0
if lock_kind == 'hash' then
  pttl = redis.call('pttl', KEYS[1])
elseif first and first ~= ARGV[2] then
  -- Free, but someone else is first: make sure it knows.
  redis.call(publish, ARGV[4] .. ':' .. first, '0')
end
local is_first = 0
if first == ARGV[2] then is_first = 1 end
return {0, pttl, is_first}
