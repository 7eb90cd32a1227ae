-- semaphore_acquire: take permits if enough are available.
-- KEYS[1]  permit count (NAME)
-- ARGV[1]  permits wanted (>= 1)
-- Returns  {1, left}       taken; left = permits still available
--          {0, available}  not enough: nothing taken
--         {-1, 0}          KEYS[1] holds something other than an integer; nothing is written
-- DECRBY and INCRBY fail on anything but a decimal 64-bit integer: the
-- count is checked before anything is written.
-- (integer: lib/checks.lua)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0, 0}
end
local count = kind == 'string' and integer(redis.call('get', KEYS[1]))
if not count then
  return {-1, 0}
end
local wanted = tonumber(ARGV[1])
if count < wanted then
  return {0, count}
end
return {1, redis.call('decrby', KEYS[1], wanted)}
