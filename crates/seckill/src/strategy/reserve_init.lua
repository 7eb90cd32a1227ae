-- Sets a voucher's Redis stock and buyers for the reserve strategy.
--
-- KEYS[1]  {seckill}:stock:VOUCHER    string: units left
-- KEYS[2]  {seckill}:buyers:VOUCHER   set: user ids that have reserved
-- ARGV[1]  "create": the voucher is new; overwrite whatever an older database left
--          "lazy":   set only if KEYS[1] is missing (SET NX semantics)
-- ARGV[2]  stock
-- ARGV[3..] user ids that already have an order in the database
--
-- Returns  1 when the keys were written, 0 when KEYS[1] existed ("lazy" only)
if ARGV[1] == 'lazy' and redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2])
for i = 3, #ARGV do
    redis.call('SADD', KEYS[2], ARGV[i])
end
return 1
