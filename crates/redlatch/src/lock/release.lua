-- release: drop one hold; the last hold deletes the lock and wakes waiters;
-- for one lock, or for several in one call (concurrent releases of one
-- client, coalesced: Redis pays the script's fixed cost once).
-- For each lock i = 1..#KEYS:
-- KEYS[i]      lock hash (NAME)
-- ARGV[3i-2]   channel (redisson_lock__channel:{NAME})
-- ARGV[3i-1]   lease in milliseconds, re-applied while holds remain: lengthened,
--              never shortened (lib/lease.lua)
-- ARGV[3i]     owner field
-- ARGV[3n+1]   publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- ARGV[3n+2]   '1': the last hold publishes whether or not a waiter marked it
--              (waiters that do not mark: Redisson's, or this client's own
--              queued behind a waiter); absent or '0': only when marked
-- Returns, two entries per lock, in order:
--          1, n      the lock is deleted, and '0' published when a waiter marked
--                    the hold (WAITER_FIELD, acquire.lua) or ARGV[3n+2] asks;
--                    n subscriber connections got it (0: not published)
--          0, 0      one hold dropped, others remain
--         -1, 0      the owner does not hold the lock (expired, or another owner has it)
--         -2, 0      the key exists but is not a hash (WRONGTYPE), nothing written; or
--                    the owner's hold count is not an integer: the hold cannot be
--                    counted, so the owner's field is removed (the last field: the
--                    lock is deleted and '0' published, as for a last hold)
--         -5, error  the server refused a command on this lock's key (an ACL
--                    NOPERM, say); error = its message; nothing is written
-- One lock's fault is its own: the others of the call get their own outcomes.
-- The common case (last hold, nobody waiting) costs two calls: HMGET, DEL;
-- with a waiter, PUBLISH as well.
local publish = ARGV[3 * #KEYS + 1] or 'publish'
local always = ARGV[3 * #KEYS + 2] == '1'
local function release(lock, channel, lease, owner)
  local got = redis.call('hmget', lock, owner, WAITER_FIELD)
  local count = got[1]
  if not count then
    if redis.call('exists', lock) == 0 then
      -- Nobody holds it: waiters may be parked on a lock that expired, wake them.
      redis.call(publish, channel, '0')
    end
    return -1, 0
  end
  -- The common case, the last hold, needs no parsing.
  local holds = count == '1' and 1 or integer(count)
  if not holds then
    -- Kept, the field would hold the lock with no guard to give it back.
    redis.call('hdel', lock, owner, TOKEN_FIELD, WAITER_FIELD)
    if redis.call('exists', lock) == 0 then
      redis.call(publish, channel, '0')
    end
    return -2, 0
  end
  if holds > 1 then
    give_back('hincrby', lock, owner, -1)
    lengthen(lock, lease)
    return 0, 0
  end
  redis.call('del', lock)
  if got[2] or always then
    return 1, redis.call(publish, channel, '0')
  end
  return 1, 0
end
-- An error raised for one lock fails that lock alone (as in acquire.lua).
local function fault(err)
  local kind, message = lock_fault(err)
  if kind == 'data' then return -2, 0 end
  if kind == 'refused' then return -5, message end
  raise_again(err)
end
return each_lock(#KEYS, function(i)
  return release(KEYS[i], ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i])
end, fault)
