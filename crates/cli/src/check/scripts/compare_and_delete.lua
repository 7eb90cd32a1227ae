-- set-nx-px's release: delete the lock only if it still holds our token.
-- KEYS[1]: the lock key
-- ARGV[1]: our token
-- Returns 1 when deleted, 0 when the key held another token or was gone.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
