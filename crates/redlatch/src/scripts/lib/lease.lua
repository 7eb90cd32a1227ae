-- lease: how a script sets the lease of a hold that already exists,
-- prepended to the scripts that do (crates/redlatch/src/scripts/mod.rs).
-- A lease already set is never shortened: a request sent later (a renewal)
-- can run before one sent earlier (a re-entry with a shorter lease) when the
-- server lost its script cache and the client loads the script again. Only
-- lengthening keeps the key's expiry at or after `sent_at + lease` of every
-- request that ran, whatever their order. A key with no expiry (PTTL -1)
-- gets the lease as before.
local function lengthen(key, lease)
  if redis.call('pttl', key) < tonumber(lease) then
    redis.call('pexpire', key, lease)
  end
end
