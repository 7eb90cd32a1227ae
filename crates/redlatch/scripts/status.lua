-- status: an atomic snapshot of one lock.
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter
-- Returns  {kind, pttl, last_token, field1, count1, field2, count2, ...}
--          kind: 1 hash (held), 0 none (free), -1 another type (WRONGTYPE)
--          pttl: remaining lease in ms, -1 no expiry, -2 free
--          last_token: the counter's value, -1 when never acquired
local kind = redis.call('type', KEYS[1]).ok
local token = tonumber(redis.call('get', KEYS[2]) or '-1')
if kind == 'none' then
  return {0, -2, token}
end
if kind ~= 'hash' then
  return {-1, -2, token}
end
local out = {1, redis.call('pttl', KEYS[1]), token}
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields do
  out[#out + 1] = fields[i]
end
return out
