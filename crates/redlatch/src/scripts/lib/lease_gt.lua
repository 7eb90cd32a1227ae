-- lease, the form the function library uses (functions need Redis or
-- Valkey 7, which have PEXPIRE GT): the same rule as lib/lease.lua, a lease
-- already set is never shortened, in one call where that one read and
-- one write. GT treats a key with no expiry as never expiring, so such a
-- key (PTTL -1) is given the lease as lib/lease.lua gives it.
local function lengthen(key, lease)
  if redis.call('pexpire', key, lease, 'GT') == 0
      and redis.call('pttl', key) == -1 then
    redis.call('pexpire', key, lease)
  end
end
