-- semaphore_available: read the number of available permits.
-- KEYS[1]  permit count (NAME)
-- Returns  count  (0 when the semaphore has no count yet)
--          -1     KEYS[1] holds something other than a non-negative integer
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
local count = kind == 'string' and tonumber(redis.call('get', KEYS[1]))
if not count or count < 0 then
  return -1
end
return count
