-- fair_acquire: take the fair lock when it is free and this owner is first in
-- line (or nobody waits), re-enter it, or take or keep a place in line.
-- Layout and arithmetic of Redisson's RFairLock (lib/fair_line.lua); the lock
-- hash is the reentrant lock's.
-- KEYS[1]  lock hash (NAME): field = owner -> hold count
-- KEYS[2]  the line (redisson_lock_queue:{NAME}): list of owner fields, oldest first
-- KEYS[3]  deadlines (redisson_lock_timeout:{NAME}): zset owner -> ms since the epoch
-- KEYS[4]  fencing counter, never expires (as in acquire.lua)
-- KEYS[5]  signs of life (redlatch_fair_alive:{NAME}): zset owner -> ms, redlatch only
-- KEYS[6]  hand-off terms (redlatch_fair_terms:{NAME}): hash owner -> 'LEASE:W' (the
--          first lease of a hold handed over, the owner's W), redlatch only
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field (<client-id>:<owner>)
-- ARGV[3]  wait time W in ms (Redisson's fairLockWaitTimeout, or the acquire's timeout)
-- ARGV[4]  place lease in ms: the sign of life lasts this long; 0 = a single try
--          that does not join the line
-- ARGV[5]  waiter channel prefix (redisson_lock__channel:{NAME}); the waiter with
--          owner field F listens on PREFIX:F
-- ARGV[6]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- ARGV[7]  the first lease in ms of a hold a release hands to this owner; absent or
--          0: none. An owner that takes hand-offs (an anonymous redlatch waiter,
--          unique to one acquire) leaves its terms with its place, and a hold it
--          finds is the one handed to it, never a re-entry
-- Returns {1, token}        acquired afresh; token = the counter's next (next_token,
--                           lib/checks.lua), kept in the hash; lease set. Or, ARGV[7]
--                           above 0, the hold handed to this owner: its token, the
--                           lease set again from now
--         {2, token}        re-entered (hold count + 1); token = the hold's;
--                           the lease is lengthened, never shortened (lib/lease.lua)
--         {0, pttl, first, counter}
--                           not acquired: pttl = the holder's remaining lease (-1: no
--                           expiry; 0: free, but another waiter is first, and was woken);
--                           first = 1 when this owner is first in line; counter = the
--                           counter's value (0: absent): a hand-off with a token above it
--                           came after this call
--         {-1, 0, 0}        a value the lock cannot use: a key holds another type, the
--                           owner's hold count is not an integer, the counter cannot
--                           give a token (is_counter: lib/checks.lua), or a re-entered
--                           hold's kept token is not one; nothing is written
local publish = ARGV[6] or 'publish'
if redis.replicate_commands then redis.replicate_commands() end
local function kind(key) return redis.call('type', key).ok end
-- Every key is checked before anything is written (is_counter, is_hold_count:
-- lib/checks.lua).
local lock_kind, line_kind = kind(KEYS[1]), kind(KEYS[2])
local deadlines_kind, alive_kind = kind(KEYS[3]), kind(KEYS[5])
local terms_kind = kind(KEYS[6])
if (lock_kind ~= 'none' and lock_kind ~= 'hash')
    or (line_kind ~= 'none' and line_kind ~= 'list')
    or (deadlines_kind ~= 'none' and deadlines_kind ~= 'zset')
    or (alive_kind ~= 'none' and alive_kind ~= 'zset')
    or (terms_kind ~= 'none' and terms_kind ~= 'hash')
    or not is_counter(KEYS[4]) then
  return {-1, 0, 0}
end
local held = lock_kind == 'hash' and redis.call('hget', KEYS[1], ARGV[2])
if not is_hold_count(held) then
  return {-1, 0, 0}
end
-- A re-entry's token, read before the hold count is raised: a kept token
-- the lock cannot use (hold_token) refuses the re-entry unwritten.
local kept = held and hold_token(KEYS[1], KEYS[4])
if held and not kept then
  return {-1, 0, 0}
end
local hand_off = tonumber(ARGV[7] or '0') or 0
local takes_hand_off = hand_off > 0
if held and takes_hand_off then
  -- Handed over by a release (its message still on the way, or missed):
  -- the lease counted again from now, as for a hold taken now.
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, kept}
end
local now = server_now()
local wait = tonumber(ARGV[3])
local first = drop_dead(KEYS[2], KEYS[3], KEYS[5], KEYS[6], now)
if lock_kind == 'none' then
  if not first or first == ARGV[2] then
    if first then redis.call('lpop', KEYS[2]) end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('zrem', KEYS[5], ARGV[2])
    redis.call('hdel', KEYS[6], ARGV[2])
    -- Everyone behind moves one place up.
    shorten_all(KEYS[3], wait)
    local token = next_token(KEYS[4])
    redis.call('hset', KEYS[1], ARGV[2], 1, TOKEN_FIELD, kept_token(token))
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
  end
elseif held then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  lengthen(KEYS[1], ARGV[1])
  return {2, kept}
end
local place = tonumber(ARGV[4])
-- Out of memory a place is not taken (nor its sign of life written): the
-- lock is busy all the same, and the caller asks again.
local placed = place > 0
if placed then
  if not redis.call('zscore', KEYS[3], ARGV[2]) then
    -- Join at the back: the deadline of the waiter before, or the lock's
    -- remaining lease, plus W (Redisson's arithmetic, PTTL's -1/-2 included).
    local last = redis.call('lindex', KEYS[2], -1)
    local before = last and last ~= ARGV[2] and tonumber(redis.call('zscore', KEYS[3], last))
    local ttl
    if before then
      ttl = before - now
    else
      ttl = redis.call('pttl', KEYS[1])
    end
    local joined = unless_out_of_memory('zadd', KEYS[3], ttl + wait + now, ARGV[2])
    if joined == 1 then
      redis.call('rpush', KEYS[2], ARGV[2])
      if takes_hand_off then
        redis.call('hset', KEYS[6], ARGV[2], ARGV[7] .. ':' .. ARGV[3])
      end
    end
    placed = joined ~= false
  end
end
if placed then
  -- A sign of life; the set goes by itself once every sign ran out. A sign
  -- renewed takes no memory: out of memory too, a waiter keeps its place.
  if redis.call('zscore', KEYS[5], ARGV[2]) then
    give_back('zadd', KEYS[5], now + place, ARGV[2])
  else
    placed = unless_out_of_memory('zadd', KEYS[5], now + place, ARGV[2]) ~= false
  end
end
if placed then
  local latest = redis.call('zrange', KEYS[5], -1, -1, 'withscores')
  local lasts = math.max(tonumber(latest[2]) - now, place)
  redis.call('pexpire', KEYS[5], lasts)
  -- The terms last as long as the signs of life (a dead waiter's go with them).
  if takes_hand_off then redis.call('pexpire', KEYS[6], lasts) end
  first = first or ARGV[2]
end
local pttl = 0
if lock_kind == 'hash' then
  pttl = redis.call('pttl', KEYS[1])
elseif first and first ~= ARGV[2] then
  -- Free, but someone else is first: make sure it knows.
  redis.call(publish, ARGV[5] .. ':' .. first, '0')
end
local is_first = 0
if first == ARGV[2] then is_first = 1 end
return {0, pttl, is_first, tonumber(redis.call('get', KEYS[4]) or '0')}
