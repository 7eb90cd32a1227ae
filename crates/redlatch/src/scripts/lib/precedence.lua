-- precedence: a waiter that has waited long enough claims the lock's next
-- turn (redlatch_lock_precedence:{NAME}, a string '<since>:<owner field>'
-- with an expiry), so that a free lock goes to the longest waiter that
-- asked rather than to whichever contender the scheduler runs first. A
-- claim never grants a lock: it only makes a free lock refuse younger
-- contenders until the claimant comes (or its claim lapses). A claim
-- lives only while its claimant attempts when woken: the first refusal of a
-- free lock cuts it to a short "come now" window, so a claimant that is not
-- there to take its turn (a future polled rarely, a stopped process) holds
-- a free lock back that window at most per attempt it made.

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

-- A free lock refuses a contender for the claim on `key`: the claimant
-- has `come` ms left at most to take its turn (never more than the claim
-- had). Returns the ms left.
local function come_now(key, come)
  local left = redis.call('pttl', key)
  if left < 0 or left > come then
    redis.call('pexpire', key, come)
    return come
  end
  return left
end

-- Records `owner`'s claim (it has waited `waited` ms) unless an older one
-- stands; keeps it `keep` ms. True when the claim is the owner's now. A
-- server out of memory refuses the claim's write: then there is no claim
-- (the lock is busy all the same), never an error.
local function claim(key, owner, waited, keep)
  local now = server_ms()
  local since = now - waited
  local standing, claimant = claim_of(key)
  if standing and claimant ~= owner and standing <= since then
    return false
  end
  local written = redis.pcall('set', key, since .. ':' .. owner, 'px', keep)
  if type(written) == 'table' and written.err then
    if string.find(written.err, '^OOM') then return false end
    error(written)
  end
  return true
end
