-- Reserves one unit of a voucher for one user, atomically, and queues the order.
--
-- KEYS[1]  {seckill}:stock:VOUCHER    string: units left (set at voucher creation or lazily)
-- KEYS[2]  {seckill}:buyers:VOUCHER   set: user ids that have reserved
-- KEYS[3]  {seckill}:orders           stream: accepted orders, for the consumer group
-- ARGV[1]  user id
-- ARGV[2]  order id (from the id worker)
-- ARGV[3]  voucher id
-- ARGV[4]  created_at, epoch milliseconds
--
-- Returns  0  reserved: stock decremented, user added, order appended to the stream
--          1  sold out
--          2  the user already reserved this voucher
--         -1  KEYS[1] missing: initialise it from the database, then call again
local stock = redis.call('GET', KEYS[1])
if not stock then
    return -1
end
if tonumber(stock) <= 0 then
    return 1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
    return 2
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*',
    'order_id', ARGV[2], 'user_id', ARGV[1], 'voucher_id', ARGV[3], 'created_at', ARGV[4])
return 0
