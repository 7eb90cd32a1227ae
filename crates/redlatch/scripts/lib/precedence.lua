-- precedence: a waiter that has waited long enough claims the lock's next
-- turn (redlatch_lock_precedence:{NAME}, a string '<since>:<owner field>'
-- with an expiry), so that a free lock goes to the longest waiter that
-- asked rather than to whichever contender the scheduler runs first. A
-- claim never grants a lock: it only makes a free lock refuse younger
-- contenders until the claimant comes (or its claim lapses).

-- Server time in ms.
local function server_ms()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- The claim on `key` as (since ms, owner field), or nil when there is none
-- (or the key holds no claim, whatever its type: then it is no claim
-- either, and the next claim overwrites it).
local function claim_of(key)
  local raw = redis.pcall('get', key)
  if type(raw) ~= 'string' then return nil end
  local at = string.find(raw, ':', 1, true)
  local since = at and tonumber(string.sub(raw, 1, at - 1))
  if not since then return nil end
  return since, string.sub(raw, at + 1)
end

-- Whether `owner`, which has waited `waited` ms (0: not long enough to
-- ask), may take a free lock past the claim on `key`: 'own' when the claim
-- is its own (to be taken out once the lock is taken), 'pass' when there
-- is none or the owner has waited longer than the claimant, nil otherwise.
local function may_pass(key, owner, waited)
  local since, claimant = claim_of(key)
  if not since then return 'pass' end
  if claimant == owner then return 'own' end
  if waited > 0 and server_ms() - waited < since then return 'pass' end
  return nil
end

-- Records `owner`'s claim (it has waited `waited` ms) unless an older one
-- stands; keeps it `keep` ms. True when the claim is the owner's now.
local function claim(key, owner, waited, keep)
  local now = server_ms()
  local since = now - waited
  local standing, claimant = claim_of(key)
  if standing and claimant ~= owner and standing <= since then
    return false
  end
  redis.call('set', key, since .. ':' .. owner, 'px', keep)
  return true
end
