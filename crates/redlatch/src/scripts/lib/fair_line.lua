-- fair_line: the fair lock's line, shared by its scripts (prepended to them
-- when they are loaded, crates/redlatch/src/scripts/mod.rs).
-- The line and its deadlines are Redisson's RFairLock layout and arithmetic:
--   line       list of owner fields, oldest first
--   deadlines  zset owner -> ms since the epoch: a waiter joins with the
--              deadline of the waiter before it (or now + the lock's PTTL)
--              plus the wait time W; each acquisition takes W off every
--              deadline; the first waiter is dropped once its deadline passes.
-- redlatch adds, where Redisson never looks:
--   alive      zset owner -> ms: a redlatch waiter's sign of life, pushed a
--              place lease ahead at each attempt; a first waiter whose sign of
--              life ran out died, and is dropped at once. Redisson's waiters
--              are never in it, so this rule never drops them.
--   terms      hash owner -> 'LEASE:W' (ms): a redlatch waiter that takes the
--              lock handed over by the release (hand_to), the first lease of
--              the hold it is handed and its W; anonymous owners only. Redisson's waiters are never in it: they are woken
--              with '0' and take the lock with their own script.

-- What a hand-off publishes before the new holder's fencing token: any
-- other message ('0', Redisson's unlock message) only wakes the waiter.
local HANDED = 'redlatch:handed:'

-- The longest lease and W a hand-off's terms may name, in ms: the client's
-- longest lease (30 days, crates/redlatch/src/settings/limits.rs). Terms
-- beyond it, or a lease of 0, are bad data: PEXPIRE would refuse the lease
-- or delete the hold it just wrote.
local MAX_TERM_MS = 2592000000

-- Forgets `owner`'s hand-off terms. A terms key of another type (bad data)
-- has none to forget: the line goes on without it, never half-written.
local function forget_terms(terms, owner)
  redis.pcall('hdel', terms, owner)
end

-- The first lease and W of `owner`'s hand-off terms, as numbers; nil when
-- it left none, or terms the lock cannot use (another type, not two
-- decimal numbers, a lease of 0, either beyond MAX_TERM_MS).
local function terms_of(terms, owner)
  local raw = redis.pcall('hget', terms, owner)
  if type(raw) ~= 'string' then return nil end
  local lease, wait = string.match(raw, '^(%d%d?%d?%d?%d?%d?%d?%d?%d?%d?):(%d%d?%d?%d?%d?%d?%d?%d?%d?%d?)$')
  lease, wait = tonumber(lease), tonumber(wait)
  if not lease or lease < 1 or lease > MAX_TERM_MS or wait > MAX_TERM_MS then return nil end
  return lease, wait
end

-- The server's clock in ms: every deadline is dated by it.
local function server_now()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Drops dead waiters from the front of the line (Redisson's "remove stale
-- threads", plus redlatch's sign of life). A first waiter without a deadline
-- stays, as Redisson keeps it. Returns the first waiter left (false: none),
-- so that callers need not read it again.
local function drop_dead(line, deadlines, alive, terms, now)
  while true do
    local head = redis.call('lindex', line, 0)
    if not head then return false end
    local deadline = tonumber(redis.call('zscore', deadlines, head))
    local life = tonumber(redis.call('zscore', alive, head))
    if not ((deadline and deadline <= now) or (life and life <= now)) then return head end
    redis.call('lpop', line)
    redis.call('zrem', deadlines, head)
    redis.call('zrem', alive, head)
    forget_terms(terms, head)
  end
end

-- Takes `wait` ms off the deadline of every waiter in `members` that has one
-- (Redisson's shift when a waiter gives up its place; a member without a
-- deadline is not given one).
local function shorten(deadlines, members, wait)
  for _, member in ipairs(members) do
    if redis.call('zscore', deadlines, member) then
      redis.call('zincrby', deadlines, -wait, member)
    end
  end
end

-- Takes `wait` ms off every deadline (Redisson's shift when a waiter takes
-- the lock: everyone moves one place up). One ZADD per 500 waiters rather
-- than a ZINCRBY each: this runs on every hand-off. The scores come out as
-- ZINCRBY's would (the same double subtraction, written back with 17
-- digits, which round-trip exactly).
local function shorten_all(deadlines, wait)
  local entries = redis.call('zrange', deadlines, 0, -1, 'withscores')
  local args = {}
  for i = 1, #entries, 2 do
    args[#args + 1] = string.format('%.17g', tonumber(entries[i + 1]) - wait)
    args[#args + 1] = entries[i]
    if #args == 1000 or i + 1 == #entries then
      redis.call('zadd', deadlines, unpack(args))
      args = {}
    end
  end
end

-- Hands the free lock to `head`, the first waiter in line, when it left its
-- terms (a redlatch waiter that takes a hand-off): one hold under the
-- counter's next token (next_token, kept in the hash as fair_acquire keeps
-- it), its lease, out of the line with everyone behind moved one place up
-- by its W (as when it takes the lock itself), and the token published to
-- it, so that it holds the lock without another call. `k` names the keys:
-- lock, line, deadlines, alive, terms, counter. Returns the receivers of
-- the message, or false with nothing written (no terms, a counter that
-- cannot give a token, or a server out of memory): the caller wakes the
-- waiter, which takes the lock itself. Terms the lock cannot use
-- (terms_of) are none.
local function hand_to(k, head, channel, publish)
  local lease, wait = terms_of(k.terms, head)
  if not lease or not is_counter(k.counter) then return false end
  -- The first write that takes memory: refused out of memory, nothing is.
  if unless_out_of_memory('hset', k.lock, head, 1) == false then return false end
  local token = next_token(k.counter)
  if not token then
    redis.call('del', k.lock)
    return false
  end
  redis.call('hset', k.lock, TOKEN_FIELD, kept_token(token))
  redis.call('pexpire', k.lock, lease)
  redis.call('lpop', k.line)
  redis.call('zrem', k.deadlines, head)
  redis.call('zrem', k.alive, head)
  forget_terms(k.terms, head)
  shorten_all(k.deadlines, wait)
  return redis.call(publish, channel .. ':' .. head, HANDED .. string.format('%.0f', token))
end
