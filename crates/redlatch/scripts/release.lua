-- release: drop one hold; the last hold deletes the lock and wakes waiters;
-- for one lock, or for several in one call (concurrent releases of one
-- client, coalesced: Redis pays the script's fixed cost once).
-- For each lock i = 1..#KEYS:
-- KEYS[i]      lock hash (NAME)
-- ARGV[3i-2]   channel (redisson_lock__channel:{NAME})
-- ARGV[3i-1]   lease in milliseconds, re-applied while holds remain
-- ARGV[3i]     owner field
-- ARGV[3n+1]   publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns, two entries per lock, in order:
--          1, n   the lock is deleted and '0' published; n subscriber connections got it
--          0, 0   one hold dropped, others remain
--         -1, 0   the owner does not hold the lock (expired, or another owner has it)
--         -2, 0   the key exists but is not a hash (WRONGTYPE)
-- The common case (last hold) costs three calls: HGET, DEL, PUBLISH.
local publish = ARGV[3 * #KEYS + 1] or 'publish'
local function release(lock, channel, lease, owner)
  local count = redis.pcall('hget', lock, owner)
  if type(count) == 'table' and count.err then
    return -2, 0
  end
  if not count then
    if redis.call('exists', lock) == 0 then
      -- Nobody holds it: waiters may be parked on a lock that expired, wake them.
      redis.call(publish, channel, '0')
    end
    return -1, 0
  end
  if tonumber(count) > 1 then
    redis.call('hincrby', lock, owner, -1)
    redis.call('pexpire', lock, lease)
    return 0, 0
  end
  redis.call('del', lock)
  return 1, redis.call(publish, channel, '0')
end
local out = {}
for i = 1, #KEYS do
  local code, value = release(KEYS[i], ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i])
  out[#out + 1] = code
  out[#out + 1] = value
end
return out
