-- permit_renew: extend the leases of many held permits in one call.
-- KEYS[i]      expiries sorted set of entry i ({NAME}:timeout)
-- ARGV[2i-1]   permit id of entry i (16 raw bytes)
-- ARGV[2i]     lease in milliseconds for entry i
-- Returns      array: 1 when entry i was extended, 0 when it is gone or already
--              expired (the next acquire reclaims it; one bad key never fails the batch)
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  local score = redis.pcall('zscore', KEYS[i], ARGV[2 * i - 1])
  if type(score) ~= 'table' and score and tonumber(score) > now then
    local expiry = now + tonumber(ARGV[2 * i])
    give_back('zadd', KEYS[i], 'XX', string.format('%d', expiry), ARGV[2 * i - 1])
    out[i] = 1
  end
end
return out
