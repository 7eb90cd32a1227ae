-- Moves one entry of the order stream to the dead-letter stream, atomically:
-- XADD to the dead-letter stream (its fields plus reason, tries, source_id,
-- error), then XACK from the order stream.
--
-- KEYS[1]  {seckill}:orders       the order stream
-- KEYS[2]  {seckill}:orders:dead  the dead-letter stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the consumer that holds the entry
-- ARGV[3]  the entry's id
-- ARGV[4]  reason: malformed, voucher_gone, no_stock, duplicate_user, max_tries, id_collision
-- ARGV[5]  fewest deliveries before moving it (0: move it now)
-- ARGV[6]  what went wrong, for people
--
-- Returns {code, tries}, tries being the entry's delivery count:
--   1, n   moved
--   0, n   delivered fewer than ARGV[5] times: left pending, to retry
--  -1, 0   not pending for ARGV[2] any more (another consumer took it over,
--          or it was acknowledged): nothing done, so it is never moved twice
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #pending == 0 then
    return {-1, 0}
end
local tries = pending[1][4]
if tries < tonumber(ARGV[5]) then
    return {0, tries}
end
local meta = {reason = true, tries = true, source_id = true, error = true}
local args = {'XADD', KEYS[2], '*'}
local entry = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
if #entry == 1 then
    local fields = entry[1][2]
    for i = 1, #fields, 2 do
        if not meta[fields[i]] then
            args[#args + 1] = fields[i]
            args[#args + 1] = fields[i + 1]
        end
    end
end
args[#args + 1] = 'reason'
args[#args + 1] = ARGV[4]
args[#args + 1] = 'tries'
args[#args + 1] = tries
args[#args + 1] = 'source_id'
args[#args + 1] = ARGV[3]
args[#args + 1] = 'error'
args[#args + 1] = ARGV[6]
redis.call(unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return {1, tries}
