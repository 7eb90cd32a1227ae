-- rw_read_renew: extend many read holds in one call (the watchdog's batch).
-- KEYS[i]      lock hash of entry i
-- ARGV[3i-2]   read field of entry i
-- ARGV[3i-1]   lease in milliseconds for entry i
-- ARGV[3i]     timeout key prefix of entry i ({NAME}:<field>:rwlock_timeout)
-- Returns      array: 1 when entry i was extended (the hash and each of the field's
--              timeout keys, lengthened, never shortened: lib/lease.lua), 0 when its
--              owner no longer reads
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  if redis.call('type', KEYS[i]).ok == 'hash' then
    local count = tonumber(redis.call('hget', KEYS[i], ARGV[3 * i - 2]))
    if count and count > 0 then
      local lease = ARGV[3 * i - 1]
      lengthen(KEYS[i], lease)
      for n = 1, count do
        lengthen(ARGV[3 * i] .. ':' .. n, lease)
      end
      out[i] = 1
    end
  end
end
return out
