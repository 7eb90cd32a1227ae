-- acquire: take the reentrant hash lock, or re-enter it as the same owner;
-- for one lock, or for several in one call (concurrent acquires of one
-- client, coalesced: Redis pays the script's fixed cost once).
-- Layout compatible with Redisson's RLock: hash KEYS[1], field = owner -> hold count.
-- For each lock i = 1..#KEYS/2:
-- KEYS[2i-1]  lock hash (NAME)
-- KEYS[2i]    fencing counter (redisson_lock_token:{NAME}), never expires
-- ARGV[2i-1]  lease in milliseconds
-- ARGV[2i]    owner field (<client-uuid>:<owner>)
-- Returns, two entries per lock, in order:
--         1, token   acquired afresh; token = INCR of the counter
--         2, token   re-entered (hold count + 1); token = current counter value
--         0, pttl    held by another owner; pttl = its remaining lease (-1: no expiry)
--        -1, 0       the hash exists but is not a hash, or the counter is not an
--                    integer INCR accepts (WRONGTYPE); nothing is written for it
-- Check first, write last: the counter is the one thing that can fail, so it
-- is read (re-entry) or incremented (fresh acquisition) before the lock is
-- written. A busy lock is answered without looking at the counter. An error
-- of the server itself (READONLY on a demoted master, OOM) ends the call
-- with that error.
local function acquire(lock, counter, lease, owner)
  local kind = redis.call('type', lock).ok
  if kind == 'none' then
    local token = redis.pcall('incr', counter)
    if type(token) == 'table' then
      -- The counter's own faults (not an integer, overflow, another type)
      -- are WRONGTYPE; anything else goes back to the caller as it is.
      local err = token.err or ''
      if string.find(err, '^WRONGTYPE') or string.find(err, 'not an integer')
          or string.find(err, 'overflow') then
        return -1, 0
      end
      return nil, token
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return 1, token
  end
  if kind ~= 'hash' then
    return -1, 0
  end
  if redis.call('hexists', lock, owner) == 1 then
    local raw = redis.pcall('get', counter)
    if type(raw) == 'table' or (raw and not string.match(raw, '^%-?%d+$')) then
      return -1, 0
    end
    local token = tonumber(raw or '0')
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return 2, token
  end
  return 0, redis.call('pttl', lock)
end
local out = {}
for i = 1, math.floor(#KEYS / 2) do
  local code, value = acquire(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
  if code == nil then return value end
  out[#out + 1] = code
  out[#out + 1] = value
end
return out
