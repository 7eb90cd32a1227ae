-- semaphore_available: read the number of available permits.
-- KEYS[1]  permit count (NAME)
-- Returns  {1, count}  (0 when the semaphore has no count yet; may be negative:
--                      Redisson's addPermits can take a count below zero)
--          {-1, 0}     KEYS[1] holds something other than a decimal 64-bit
--                      integer (the acquire's check)
-- (integer: lib/checks.lua)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {1, 0}
end
local count = kind == 'string' and integer(redis.call('get', KEYS[1]))
if not count then
  return {-1, 0}
end
return {1, count}
