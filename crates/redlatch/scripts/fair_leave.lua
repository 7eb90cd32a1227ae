-- fair_leave: a waiter gives up its place in line (cancelled, or timed out),
-- as Redisson's acquireFailed does: every waiter behind it moves one place up
-- (W off its deadline).
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  the line (redisson_lock_queue:{NAME})
-- KEYS[3]  deadlines (redisson_lock_timeout:{NAME})
-- KEYS[4]  signs of life (redlatch_fair_alive:{NAME})
-- ARGV[1]  waiter channel prefix (redisson_lock__channel:{NAME})
-- ARGV[2]  owner field
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- ARGV[4]  wait time W in ms, the one the waiter joined with
-- Returns  1 the owner left the line, 0 it was not in it.
-- When the lock is free, the (new) first waiter is woken: it may have been
-- waiting behind the one that left.
local publish = ARGV[3] or 'publish'
local wait = tonumber(ARGV[4]) or 0
local line = redis.call('lrange', KEYS[2], 0, -1)
local behind = {}
local found = false
for _, member in ipairs(line) do
  if found then
    behind[#behind + 1] = member
  elseif member == ARGV[2] then
    found = true
  end
end
if found then shorten(KEYS[3], behind, wait) end
local removed = redis.call('lrem', KEYS[2], 0, ARGV[2])
redis.call('zrem', KEYS[3], ARGV[2])
redis.call('zrem', KEYS[4], ARGV[2])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
  local first = redis.call('lindex', KEYS[2], 0)
  if first then
    redis.call(publish, ARGV[1] .. ':' .. first, '0')
  end
end
if removed > 0 then return 1 end
return 0
