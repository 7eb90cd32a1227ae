-- permit_release: give one permit back by its id and wake waiters.
-- KEYS[1]  permit count (NAME)
-- KEYS[2]  expiries ({NAME}:timeout)
-- ARGV[1]  channel (redisson_sc:{NAME})
-- ARGV[2]  permit id: its 16 raw bytes, as Redisson stores ids
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1   released (the new count is published)
--          2   released, but its lease had already run out (nobody had reclaimed it yet)
--          0   no such permit: it expired and was reclaimed, or was released already
--         -1   a key holds a value of the wrong type
local publish = ARGV[3] or 'publish'
local score = redis.pcall('zscore', KEYS[2], ARGV[2])
if type(score) == 'table' and score.err then
  return -1
end
if not score then
  return 0
end
local count_kind = redis.call('type', KEYS[1]).ok
if count_kind ~= 'none' and (count_kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
  return -1
end
redis.call('zrem', KEYS[2], ARGV[2])
local count = redis.call('incr', KEYS[1])
redis.call(publish, ARGV[1], count)
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if tonumber(score) <= now then
  return 2
end
return 1
