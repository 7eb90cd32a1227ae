-- token_acquire_fenced: a fenced token lock's acquire: SET NX PX and a
-- fencing token from the lock's counter, in one atomic step, so tokens grow
-- in the order the acquisitions took effect.
-- KEYS[1]  the lock key: a string, PREFIX + NAME, whose value is the holder's token
-- KEYS[2]  fencing counter, never expires: redlatch_lock_token (one per
--          server; redlatch_lock_token:{TAG} per hash slot on a cluster;
--          redisson_lock_token:{NAME} per name where asked), shared with
--          the reentrant lock's acquires: it only grows, so every name
--          that takes from it sees its tokens grow
-- ARGV[1]  the owner's token
-- ARGV[2]  lease in milliseconds
-- Returns  1, token   acquired; token = the counter's next (lib/checks.lua's
--                     next_token: a lost counter starts again from the
--                     server's time in microseconds)
--          0, pttl    held by another token (pttl: its remaining lease, -1 none)
--         -1, 0       the key is not a string, or the counter is not a
--                     non-negative integer below 2^53 - 1: nothing written
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then return {-1, 0} end
if held then return {0, redis.call('pttl', KEYS[1])} end
if not is_counter(KEYS[2]) then return {-1, 0} end
local token = next_token(KEYS[2])
if not token then return {-1, 0} end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
return {1, token}
