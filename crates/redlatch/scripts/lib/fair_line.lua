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

-- The server's clock in ms: every deadline is dated by it.
local function server_now()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Drops dead waiters from the front of the line (Redisson's "remove stale
-- threads", plus redlatch's sign of life). A first waiter without a deadline
-- stays, as Redisson keeps it. Returns the first waiter left (false: none),
-- so that callers need not read it again.
local function drop_dead(line, deadlines, alive, now)
  while true do
    local head = redis.call('lindex', line, 0)
    if not head then return false end
    local deadline = tonumber(redis.call('zscore', deadlines, head))
    local life = tonumber(redis.call('zscore', alive, head))
    if not ((deadline and deadline <= now) or (life and life <= now)) then return head end
    redis.call('lpop', line)
    redis.call('zrem', deadlines, head)
    redis.call('zrem', alive, head)
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
