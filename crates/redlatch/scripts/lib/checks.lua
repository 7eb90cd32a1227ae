-- checks: the validity checks several scripts share, prepended to them when
-- they are loaded (crates/redlatch/src/scripts/mod.rs), so that each script
-- can refuse bad data before it writes anything.

-- `value` as a number when it is a decimal 64-bit integer, the only form
-- INCRBY and DECRBY accept; nil otherwise.
local function integer(value)
  local digits = string.match(value, '^%-?([1-9]%d*)$')
  if not digits then
    if value == '0' then return 0 end
    return nil
  end
  if #digits > 19 or (#digits == 19 and digits > '9223372036854775807') then return nil end
  return tonumber(value)
end

-- True when INCR on `key` would succeed: the key is absent, or holds a
-- decimal 64-bit integer below the maximum.
local function is_counter(key)
  local key_type = redis.call('type', key).ok
  if key_type == 'none' then return true end
  if key_type ~= 'string' then return false end
  local value = redis.call('get', key)
  local digits = string.match(value, '^%-?([1-9]%d*)$')
  if not digits then return value == '0' end
  if #digits ~= 19 then return #digits < 19 end
  if string.sub(value, 1, 1) == '-' then return digits <= '9223372036854775808' end
  return digits < '9223372036854775807'
end

