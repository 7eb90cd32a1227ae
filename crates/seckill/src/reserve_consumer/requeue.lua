-- Puts dead letters back on the order stream, atomically per call: for each
-- dead entry with ARGV[1] <= id <= ARGV[2] (at most ARGV[3] of them, oldest
-- first), XADD its order fields (not reason, tries, source_id, error) plus
-- replayed_from = its dead-letter id to the order stream, and XDEL it from
-- the dead-letter stream.
--
-- KEYS[1]  {seckill}:orders:dead  the dead-letter stream
-- KEYS[2]  {seckill}:orders       the order stream
-- ARGV[1]  first id ('-': from the oldest)
-- ARGV[2]  last id, inclusive
-- ARGV[3]  most entries to move
--
-- Returns the new order-stream ids, one per entry moved (empty: none found).
local meta = {reason = true, tries = true, source_id = true, error = true, replayed_from = true}
local moved = {}
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
for _, entry in ipairs(entries) do
    local args = {'XADD', KEYS[2], '*'}
    local fields = entry[2]
    for i = 1, #fields, 2 do
        if not meta[fields[i]] then
            args[#args + 1] = fields[i]
            args[#args + 1] = fields[i + 1]
        end
    end
    args[#args + 1] = 'replayed_from'
    args[#args + 1] = entry[1]
    moved[#moved + 1] = redis.call(unpack(args))
    redis.call('XDEL', KEYS[1], entry[1])
end
return moved
