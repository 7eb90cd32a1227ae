-- fair_leave: a waiter gives up its place in line (cancelled, or timed out),
-- as Redisson's acquireFailed does: every waiter behind it moves one place up
-- (W off its deadline). A waiter that takes hand-offs (ARGV[5] '1') and was
-- handed the lock before it could take it gives the hold back, as a release.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  the line (redisson_lock_queue:{NAME})
-- KEYS[3]  deadlines (redisson_lock_timeout:{NAME})
-- KEYS[4]  signs of life (redlatch_fair_alive:{NAME})
-- KEYS[5]  hand-off terms (redlatch_fair_terms:{NAME})
-- KEYS[6]  fencing counter (as in fair_acquire.lua)
-- ARGV[1]  waiter channel prefix (redisson_lock__channel:{NAME})
-- ARGV[2]  owner field
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- ARGV[4]  wait time W in ms, the one the waiter joined with
-- ARGV[5]  '1': the owner takes hand-offs (anonymous, unique to one acquire, so a
--          hold it has is one handed to it that no guard took)
-- Returns  1 the owner left the line (or gave back the hold handed to it), 0 it
--          was in neither.
-- When the lock is free, the (new) first waiter is woken, or handed the lock
-- (hand_to, lib/fair_line.lua): it may have been waiting behind the one that left.
local publish = ARGV[3] or 'publish'
local wait = tonumber(ARGV[4]) or 0
if redis.replicate_commands then redis.replicate_commands() end
local keys = {lock = KEYS[1], line = KEYS[2], deadlines = KEYS[3], alive = KEYS[4],
  terms = KEYS[5], counter = KEYS[6]}
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
forget_terms(KEYS[5], ARGV[2])
if removed == 0 and ARGV[5] == '1' and redis.call('type', KEYS[1]).ok == 'hash'
    and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- Handed the lock, gone before taking it: nobody else may own this hold.
  redis.call('del', KEYS[1])
  removed = 1
end
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
  local first = drop_dead(KEYS[2], KEYS[3], KEYS[4], KEYS[5], server_now())
  if first and not hand_to(keys, first, ARGV[1], publish) then
    redis.call(publish, ARGV[1] .. ':' .. first, '0')
  end
end
if removed > 0 then return 1 end
return 0
