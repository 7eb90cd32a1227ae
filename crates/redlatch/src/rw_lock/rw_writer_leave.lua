-- rw_writer_leave: a waiting writer gives up (cancelled, or timed out) and
-- withdraws its claim, so readers that queued behind it may enter.
-- KEYS[1]  waiting writers (redlatch_rwlock_writers:{NAME})
-- ARGV[1]  channel (redisson_rwlock:{NAME})
-- ARGV[2]  write field
-- ARGV[3]  publish command: 'publish', or 'spublish' on a Redis Cluster (absent: 'publish')
-- Returns  1 the claim was withdrawn and '0' published, 0 there was none
local publish = ARGV[3] or 'publish'
if redis.call('zrem', KEYS[1], ARGV[2]) == 1 then
  redis.call(publish, ARGV[1], '0')
  return 1
end
return 0
