-- Gives an ended order's unit back to a voucher's Redis stock, once.
--
-- KEYS[1]  {seckill}:stock:VOUCHER     the reserve strategy's stock
-- KEYS[2]  {seckill}:returned:VOUCHER  set: ids of orders whose unit is back
-- ARGV[1]  order id
--
-- Returns 1 when the stock grew now, 0 when this order's unit was already
-- back, -1 when the voucher has no Redis stock yet (it will be read from the
-- database, which already counts the unit, when first needed).
if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
    return 0
end
redis.call('INCR', KEYS[1])
return 1
