-- renew: extend many held locks in one call (the watchdog's batch).
-- KEYS[i]      lock hash of entry i
-- ARGV[2i-1]   owner field of entry i
-- ARGV[2i]     lease in milliseconds for entry i: the lock's lease is lengthened
--              to it, never shortened (lib/lease.lua)
-- Returns      array: 1 when entry i is held by its owner (its lease now at least
--              ARGV[2i]), 0 when its owner no longer holds it (missing key, other
--              owner, or not a hash: one bad key never fails the batch)
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  if redis.call('type', KEYS[i]).ok == 'hash'
      and redis.call('hexists', KEYS[i], ARGV[2 * i - 1]) == 1 then
    lengthen(KEYS[i], ARGV[2 * i])
    out[i] = 1
  end
end
return out
