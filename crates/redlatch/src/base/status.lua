-- status: an atomic snapshot of one lock (plain, fair, or read-write).
-- KEYS[1]  lock hash (NAME)
-- KEYS[2]  fencing counter
-- ARGV[1]  '1' when KEYS[2] is the lock's own counter (one per name), whose
--          value is the lock's last token even when it is free
-- KEYS[3]  the fair lock's line (redisson_lock_queue:{NAME}), optional
-- KEYS[4]  the fair lock's deadlines (redisson_lock_timeout:{NAME}), optional
-- KEYS[5]  the fair lock's signs of life (redlatch_fair_alive:{NAME}), optional
-- Returns  {kind, pttl, last_token, mode, line, field1, count1, field2, count2, ...}
--          kind: 1 hash (held), 2 string (held: a token lock, or a SET NX PX
--                lock of another library; its value is the one field, count 1),
--                0 none (free), -1 another type (WRONGTYPE)
--          pttl: remaining lease in ms, -1 no expiry, -2 free
--          last_token: the token of the hold (TOKEN_FIELD, lib/checks.lua); without
--                      one, the lock's own counter's value; -1 when unknown
--          mode: 'read' or 'write' for a read-write lock, '' otherwise
--          line: owner fields waiting in line, oldest first, the dead left out
--                (deadline passed, or a redlatch waiter's sign of life ran out)
--          fields: the holders and their hold counts (a read-write lock's 'mode',
--                  the kept token and the waiters' mark left out)
local kind = redis.call('type', KEYS[1]).ok
local token = -1
if kind == 'hash' then
  local kept = redis.call('hget', KEYS[1], TOKEN_FIELD)
  local digits = kept and string.match(kept, '^t(%d+)$')
  token = digits and counter_value(digits) or -1
end
if token < 0 and ARGV[1] == '1' then
  -- Read with pcall and checked: a counter holding other data (a word, a
  -- hash) means no token, not a failed status (a nil would cut the reply).
  local counter = redis.pcall('get', KEYS[2])
  token = type(counter) == 'string' and counter_value(counter) or -1
end
local line = {}
if KEYS[4] and redis.call('type', KEYS[3]).ok == 'list'
    and redis.call('type', KEYS[4]).ok == 'zset' then
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local alive = KEYS[5] and redis.call('type', KEYS[5]).ok == 'zset'
  for _, owner in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
    local deadline = tonumber(redis.call('zscore', KEYS[4], owner))
    local life = alive and tonumber(redis.call('zscore', KEYS[5], owner))
    if (not deadline or deadline > now) and (not life or life > now) then
      line[#line + 1] = owner
    end
  end
end
if kind == 'none' then
  return {0, -2, token, '', line}
end
if kind == 'string' then
  return {2, redis.call('pttl', KEYS[1]), token, '', line, redis.call('get', KEYS[1]), 1}
end
if kind ~= 'hash' then
  return {-1, -2, token, '', line}
end
local out = {1, redis.call('pttl', KEYS[1]), token, '', line}
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] == 'mode' then
    out[4] = fields[i + 1]
  elseif fields[i] ~= TOKEN_FIELD and fields[i] ~= WAITER_FIELD then
    out[#out + 1] = fields[i]
    out[#out + 1] = fields[i + 1]
  end
end
return out
