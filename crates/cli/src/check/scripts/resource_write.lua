-- The lab's shared resource: write a counter back, incremented, and record
-- the write. In fenced mode, refuse a token lower than the highest accepted.
-- KEYS[1]: the counter
-- KEYS[2]: the highest fencing token accepted so far
-- KEYS[3]: the write log (a list, one entry per write)
-- ARGV[1]: the worker id
-- ARGV[2]: the writer's fencing token, or "" when it has none
-- ARGV[3]: the counter value the writer read
-- ARGV[4]: "1" to check the token (fenced mode), "0" not to
-- Returns {accepted (1 or 0), the counter value found before the write}.
local found = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[2])
if ARGV[4] == '1' and token ~= nil then
    local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
    if token < highest then
        redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. found .. ' rejected')
        return {0, found}
    end
    redis.call('SET', KEYS[2], token)
end
redis.call('SET', KEYS[1], tonumber(ARGV[3]) + 1)
redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. found .. ' accepted')
return {1, found}
