-- Reserves one unit of a voucher for one user, atomically, draws the order's
-- id and queues the order.
--
-- KEYS[1]  {seckill}:stock:VOUCHER    string: units left (set at voucher creation or lazily)
-- KEYS[2]  {seckill}:buyers:VOUCHER   set: user ids that have reserved
-- KEYS[3]  {seckill}:orders           stream: accepted orders, for the consumer group
-- KEYS[4]  {seckill}:icr:order:YYYYMMDD  the id worker's counter of the day (id_worker.rs)
-- ARGV[1]  user id
-- ARGV[2]  seconds since the ids' epoch (the id's upper bits)
-- ARGV[3]  voucher id
-- ARGV[4]  created_at, epoch milliseconds
--
-- Returns {code, sequence}:
--          0, n   reserved: stock decremented, user added, order appended to the
--                 stream with id = seconds * 2^32 + n (n from INCR of KEYS[4])
--          1, 0   sold out (no id drawn)
--          2, 0   the user already reserved this voucher (no id drawn)
--         -1, 0   KEYS[1] missing: initialise it from the database, then call again
--         -2, n   the day's counter passed 2^32: no id fits, nothing written
-- The id is drawn here, not in a round trip before: a click that finds the
-- voucher sold out costs one call and no id.

-- The exact decimal of seconds * 2^32 + sequence (up to 2^63): Lua numbers
-- are doubles, exact only to 2^53, so the product is built in two parts.
-- 2^32 = 4294 * 10^6 + 967296; seconds < 2^31 keeps each part below 2^53.
local function order_id(seconds, sequence)
  local low = seconds * 967296 + sequence
  local high = seconds * 4294 + math.floor(low / 1000000)
  low = low % 1000000
  if high == 0 then
    return tostring(low)
  end
  return string.format('%d%06d', high, low)
end

local stock = redis.call('GET', KEYS[1])
if not stock then
    return {-1, 0}
end
if tonumber(stock) <= 0 then
    return {1, 0}
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
    return {2, 0}
end
local sequence = redis.call('INCR', KEYS[4])
if sequence >= 4294967296 then
    return {-2, sequence}
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*',
    'order_id', order_id(tonumber(ARGV[2]), sequence), 'user_id', ARGV[1],
    'voucher_id', ARGV[3], 'created_at', ARGV[4])
return {0, sequence}
