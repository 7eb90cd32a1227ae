-- token_release: a token lock's release where the server has neither
-- DELIFEQ (Valkey 9.0+) nor DELEX ... IFEQ (Redis 8.4+): delete the lock's
-- key if it still holds this owner's token (the seeds' GET-compare-DEL).
-- KEYS[1]  the lock key: a string, PREFIX + NAME, whose value is the holder's token
-- ARGV[1]  the owner's token
-- Returns  1  deleted
--          0  not held by this token (absent, expired, or another token)
--         -1  the key is not a string (WRONGTYPE): nothing written
-- Safe to re-send on a cluster only in its re-send-safe form (a second run
-- would answer 0 for a release that took effect).
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then return -1 end
if held ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
return 1
