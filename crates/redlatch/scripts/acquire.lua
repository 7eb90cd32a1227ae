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
--         1, token   acquired afresh; token = INCR of the counter; lease set
--         2, token   re-entered (hold count + 1); token = current counter value;
--                    the lease is lengthened, never shortened (lib/lease.lua)
--         0, pttl    held by another owner; pttl = its remaining lease (-1: no expiry)
--        -1, 0       a value this lock cannot use: the hash is another type, the
--                    owner's hold count is not an integer, or the counter is not a
--                    non-negative 64-bit integer INCR can raise; nothing is written
--        -5, error   the server refused a command on this lock's keys (an ACL
--                    NOPERM, say); error = its message; nothing is written
-- One lock's fault is its own: the others of the call get their own outcomes.
-- Check first, write last: the counter and the hold count are checked
-- before the lock is written (a fresh acquisition's INCR is the check: it
-- fails on a counter that is not an integer, and a negative counter's INCR
-- is undone at once). A busy lock is answered without
-- looking at the counter. An error of the server itself (READONLY on a
-- demoted master, OOM) ends the call with that error.
local function acquire(lock, counter, lease, owner)
  local kind = redis.call('type', lock).ok
  if kind == 'none' then
    -- INCR refuses a counter that is not an integer (or would overflow);
    -- one that was negative is put back: tokens must only ever grow.
    local token = redis.call('incr', counter)
    if token < 1 then
      redis.call('decr', counter)
      return -1, 0
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return 1, token
  end
  if kind ~= 'hash' then
    return -1, 0
  end
  local count = redis.call('hget', lock, owner)
  if not count then
    return 0, redis.call('pttl', lock)
  end
  local token = counter_value(redis.call('get', counter))
  if not token or not is_hold_count(count) then
    return -1, 0
  end
  redis.call('hincrby', lock, owner, 1)
  lengthen(lock, lease)
  return 2, token
end
-- An error raised for one lock fails that lock alone: a data fault is a
-- wrong type, a refusal is handed back with the server's message, and any
-- other error (the server's own) ends the call.
local function fault(err)
  local kind, message = lock_fault(err)
  if kind == 'data' then return -1, 0 end
  if kind == 'refused' then return -5, message end
  raise_again(err)
end
return each_lock(math.floor(#KEYS / 2), function(i)
  return acquire(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
end, fault)
