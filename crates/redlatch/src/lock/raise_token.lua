-- raise_token: make a node's fencing counter at least a Redlock token, while the owner holds the lock.
-- Redlock takes the highest counter of the nodes it acquired; writing it back
-- to a majority makes every later majority see it (any two majorities share a node).
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter (as in acquire.lua)
-- ARGV[1]  owner field (<redlock-id>:<owner>)
-- ARGV[2]  token: the counter's new lower bound
-- Returns  1 the counter is now >= ARGV[2]; 0 the owner no longer holds the lock (counter untouched)
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local current = tonumber(redis.call('get', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then
  redis.call('set', KEYS[2], ARGV[2])
end
return 1
