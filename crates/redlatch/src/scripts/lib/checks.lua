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

-- True when `value` (a string) is a decimal integer from 0 up to, and with
-- `below` not up to, 2^63 - 1: the form a fencing counter or a hold count
-- must have. A negative counter is refused: tokens must only ever grow.
local function in_range(value, below)
  if value == '0' then return true end
  if not string.match(value, '^[1-9]%d*$') or #value > 19 then return false end
  if #value < 19 then return true end
  if below then return value < '9223372036854775807' end
  return value <= '9223372036854775807'
end

-- The largest fencing token: 2^53 - 1. A script's numbers are Lua's
-- doubles, exact only up to 2^53; above it INCR's reply is rounded (2^53 + 1
-- reads as 2^53), and two acquisitions could be answered one token.
local MAX_TOKEN = '9007199254740991'
-- The same as a number (exact: 2^53 - 1), not converted on every
-- acquisition. A literal: a function library's load may not call tonumber.
local MAX_TOKEN_NUMBER = 9007199254740991

-- True when `value` (a decimal string with no sign nor leading zero) is at
-- most `limit` (another), compared as the numbers they spell.
local function at_most(value, limit)
  return #value < #limit or (#value == #limit and value <= limit)
end

-- The fencing counter's value read by GET, or a hold's kept token (false:
-- absent, 0) as a number, or nil when the lock cannot use it: not an
-- integer, negative, or above MAX_TOKEN.
local function counter_value(raw)
  if not raw then return 0 end
  if not in_range(raw, false) or not at_most(raw, MAX_TOKEN) then return nil end
  return tonumber(raw)
end

-- The hash field of a lock hash that keeps the hold's fencing token, beside
-- the owner's hold count: a re-entry hands the same token back. Its name has
-- no ':', so it is never an owner field (`<client-id>:<owner>`, Redisson's
-- `<uuid>:<thread>`). Exclusive holds (plain, fair, write) keep one, for
-- as long as they last; a read hold keeps its token in its first timeout key.
local TOKEN_FIELD = 'redlatch_token'

-- The hash field a waiter of the plain lock writes into the lock it found
-- held (acquire.lua), so that the release of that hold publishes the
-- unlock message (release.lua): a hold nobody waited for is released
-- without PUBLISH. Its value, 'w', is not a number (as TOKEN_FIELD's), and
-- its name has no ':', so it is never an owner field.
local WAITER_FIELD = 'redlatch_waiters'

-- A hold's token as its hash keeps it: 't' and the decimal token. Not a
-- number to Lua: Redisson's read-lock scripts take every field of a hash
-- whose value reads as a number for a reader's hold count and walk that
-- many timeout keys, and Redisson's read lock enters a hash without a
-- 'mode' (a plain lock's): a bare token (about 2^50) would stall the server.
local function kept_token(token)
  return string.format('t%.0f', token)
end

-- The token of the hold in `lock`: the one it keeps (TOKEN_FIELD), or for
-- a hold that keeps none (an older redlatch's) the value of `counter`; nil
-- when the lock cannot use it (counter_value).
local function hold_token(lock, counter)
  local kept = redis.call('hget', lock, TOKEN_FIELD)
  if not kept then return counter_value(redis.call('get', counter)) end
  local digits = string.match(kept, '^t(%d+)$')
  return digits and counter_value(digits)
end

-- The next fencing token: INCR of `counter`. A counter that was absent (INCR
-- gave 1: a new deployment, a server restarted without its data, a counter
-- evicted) starts at the server's time in microseconds, above every token a
-- lost counter handed out unless it handed out more than one per microsecond
-- since it was made or the server's clock went back (docs/SAFETY.md).
-- nil when the counter cannot give a token: it was negative (INCR is undone:
-- tokens must only ever grow) or INCR passed MAX_TOKEN (undone too; a double
-- of 2^53 or more is what any INCR above MAX_TOKEN reads as). INCR itself
-- raises on a counter that is not an integer or would overflow.
local function next_token(counter)
  local token = redis.call('incr', counter)
  if token < 1 or token > MAX_TOKEN_NUMBER then
    redis.call('decr', counter)
    return nil
  end
  if token == 1 then
    local time = redis.call('time')
    token = tonumber(time[1]) * 1000000 + tonumber(time[2])
    redis.call('set', counter, string.format('%.0f', token))
  end
  return token
end

-- True when INCR on `key` would give a token above every earlier one (and
-- exact: next_token): the key is absent, or holds a non-negative decimal
-- integer below MAX_TOKEN.
local function is_counter(key)
  local key_type = redis.call('type', key).ok
  if key_type == 'none' then return true end
  if key_type ~= 'string' then return false end
  local value = redis.call('get', key)
  return in_range(value, true) and at_most(value, MAX_TOKEN) and value ~= MAX_TOKEN
end

-- True when an owner's field in a lock hash (HGET's reply; false: absent)
-- can take HINCRBY 1: absent, or a decimal integer from 0 below the maximum.
local function is_hold_count(raw)
  return not raw or in_range(raw, true)
end

-- What an error raised by a command on one lock's keys (caught by pcall)
-- says: 'data', a value the lock cannot use (another type, not an integer);
-- 'refused', the server refused this user those keys (ACL); nil, an error
-- of the server itself (READONLY, OOM...), which is no one lock's. Also
-- returns the error's message.
local function lock_fault(err)
  local message = type(err) == 'table' and err.err or tostring(err)
  if string.find(message, 'WRONGTYPE') or string.find(message, 'not an integer')
      or string.find(message, 'overflow') then
    return 'data', message
  end
  if string.find(message, 'NOPERM') or string.find(message, 'no permissions')
      or string.find(message, "can't access") then
    return 'refused', message
  end
  return nil, message
end

-- Raises `err` (caught by pcall) again as the server's own error reply, its
-- code first (READONLY, OOM...): the client reads the code to decide what to
-- do (the Sentinel connection follows a READONLY to the new master), and a
-- plain error() would put the script's position in front of it.
local function raise_again(err)
  local message = type(err) == 'table' and err.err or tostring(err)
  message = string.gsub(message, '^user_script:%d+: ', '')
  error({err = message})
end

-- The outcomes of locks 1..n of a batch, two entries per lock: `one(i)`
-- gives lock i's, and an error raised for lock i gives `fault(err)` for it
-- alone (`fault` raises the server's own errors again). A lock writes only
-- after its checks, so an error leaves nothing of it written and the batch
-- goes on with lock i + 1: the same as a pcall per lock, at one pcall per
-- batch when no lock fails.
local function each_lock(n, one, fault)
  local out, i = {}, 1
  local function run()
    while i <= n do
      out[2 * i - 1], out[2 * i] = one(i)
      i = i + 1
    end
  end
  while i <= n do
    local ok, err = pcall(run)
    if not ok then
      out[2 * i - 1], out[2 * i] = fault(err)
      i = i + 1
    end
  end
  return out
end
