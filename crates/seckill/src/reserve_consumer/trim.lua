-- Removes the acknowledged head of the order stream: XTRIM MINID to the
-- group's oldest pending entry, or, when nothing is pending, to just past
-- the last entry the group delivered. Never removes an entry that is not
-- yet delivered or still pending. Atomic: no delivery can slip in between
-- reading the group's state and trimming.
--
-- KEYS[1]  {seckill}:orders  the order stream (read by this group alone)
-- ARGV[1]  the consumer group
--
-- Returns {entries removed, the MINID used ('' when the group is missing)}.
local delivered = nil
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local name, last = nil, nil
    for i = 1, #group, 2 do
        if group[i] == 'name' then
            name = group[i + 1]
        elseif group[i] == 'last-delivered-id' then
            last = group[i + 1]
        end
    end
    if name == ARGV[1] then
        delivered = last
    end
end
if not delivered then
    return {0, ''}
end
local minid
local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
if summary[1] > 0 then
    minid = summary[2]
else
    local ms, seq = string.match(delivered, '^(%d+)-(%d+)$')
    local next_seq = tonumber(seq) + 1
    if next_seq < 2 ^ 53 then
        minid = ms .. '-' .. string.format('%d', next_seq)
    else
        -- Beyond exact doubles: keep the last delivered entry too.
        minid = delivered
    end
end
return {redis.call('XTRIM', KEYS[1], 'MINID', minid), minid}
