-- precedence_leave: a waiter that gives up withdraws its claim to the
-- lock's next turn (lib/precedence.lua), so a free lock need not wait for
-- the claim to lapse.
-- KEYS[1]  precedence claim (redlatch_lock_precedence:{NAME})
-- ARGV[1]  owner field
-- Returns 1 withdrawn, 0 the claim is not this owner's (or there is none).
local since, claimant = claim_of(KEYS[1])
if since and claimant == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0
