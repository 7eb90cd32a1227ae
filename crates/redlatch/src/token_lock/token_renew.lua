-- token_renew: the watchdog's renewal of token locks where the server has
-- no SET ... IFEQ (Valkey 8.1+, Redis 8.4+): for each hold, set the lease
-- again if the key still holds the owner's token (compare-and-PEXPIRE).
-- For each hold i = 1..#KEYS:
-- KEYS[i]      the lock key (a string whose value is the holder's token)
-- ARGV[2i-1]   the owner's token
-- ARGV[2i]     lease in milliseconds, set outright: a token lock's holds
--              keep the lease they were taken with, so no renewal, run in
--              any order, can shorten what an earlier one set
-- Returns, per hold in order: 1 renewed, 0 gone (absent, another token, or
-- not a string). Runs twice harmlessly.
local renewed = {}
for i = 1, #KEYS do
  local held = redis.pcall('get', KEYS[i])
  if type(held) ~= 'table' and held == ARGV[2 * i - 1] then
    redis.call('pexpire', KEYS[i], ARGV[2 * i])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
