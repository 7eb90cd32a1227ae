-- latch_count: read a count-down latch's count.
-- KEYS[1]  count (NAME)
-- Returns  {1, count}  the count as a decimal string ('0' when there is none:
--                      an open latch; may be negative where Redisson's
--                      trySetCount set it so)
--         {-1, ''}     KEYS[1] holds something other than a decimal 64-bit integer
-- (integer: lib/checks.lua)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {1, '0'}
end
local raw = kind == 'string' and redis.call('get', KEYS[1])
if not raw or not integer(raw) then
  return {-1, ''}
end
return {1, raw}
