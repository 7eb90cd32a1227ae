-- acquire: take the reentrant hash lock, or re-enter it as the same owner;
-- for one lock, or for several in one call (concurrent acquires of one
-- client, coalesced: Redis pays the script's fixed cost once).
-- Layout compatible with Redisson's RLock: hash KEYS[1], field = owner -> hold count.
-- For each lock i = 1..#KEYS/3:
-- KEYS[3i-2]  lock hash (NAME)
-- KEYS[3i-1]  fencing counter, never expires: redlatch_lock_token (one per
--             server, per slot on a cluster) or redisson_lock_token:{NAME}
-- KEYS[3i]    precedence claim (redlatch_lock_precedence:{NAME}, lib/precedence.lua)
-- ARGV[3i-2]  lease in milliseconds
-- ARGV[3i-1]  owner field (<client-uuid>:<owner>)
-- ARGV[3i]    how long this owner has waited, in ms, when that is long enough
--             to claim precedence; 0: it does not ask
-- ARGV[3n+1]  how long a claim lasts without a new attempt, in ms
-- ARGV[3n+2]  how long a free lock keeps a claimed turn once it refused
--             someone, in ms: the claimant's time to come
-- Returns, two entries per lock, in order:
--         1, token   acquired afresh; token = the counter's next (next_token,
--                    lib/checks.lua), kept in the hash; lease set
--         2, token   re-entered (hold count + 1); token = the hold's (a hold
--                    without one: the counter's value);
--                    the lease is lengthened, never shortened (lib/lease.lua)
--         0, pttl    held by another owner; pttl = its remaining lease (-1: no
--                    expiry); or free, but a longer waiter claimed its next turn:
--                    the claim is cut to ARGV[3n+2] (lib/precedence.lua) and
--                    pttl = what is left of it
--         3, pttl    held by another owner, and this owner's claim to the next
--                    turn stands (it must try again within the claim's time)
--        -1, 0       a value this lock cannot use: the hash is another type, the
--                    owner's hold count is not an integer, the counter is not a
--                    non-negative integer INCR can raise to a token of at most
--                    2^53 - 1 (lib/checks.lua), or the hold's kept token is not
--                    such an integer; nothing is written
--        -5, error   the server refused a command on this lock's keys (an ACL
--                    NOPERM, say); error = its message; nothing is written
-- One lock's fault is its own: the others of the call get their own outcomes.
-- Check first, write last: the counter and the hold count are checked
-- before the lock is written (a fresh acquisition's INCR is the check: it
-- fails on a counter that is not an integer, and a negative counter's INCR
-- is undone at once). A busy lock is answered without
-- looking at the counter, and without an error when the server is out of
-- memory (the claim's write is skipped then). An error of the server itself
-- (READONLY on a demoted master, OOM on a write the lock needs) ends the
-- call with that error.
-- A re-entry never looks at the claim: its owner holds the lock already.
-- The common case, a free lock nobody claimed, costs four calls: EXISTS of
-- the lock and its claim at once, INCR, HSET, PEXPIRE.
-- A waiter marks the hold it found (WAITER_FIELD, lib/checks.lua, once per
-- hold): its release publishes the unlock message, a release of a hold
-- nobody marked does not. The mark is written before the busy answer
-- leaves, so a waiter that subscribes and then finds the lock held by the
-- same hold is woken by its release; one that finds a later hold marks
-- that. No TYPE check: a key of another type fails HMGET, the first
-- command that reads it as a hash (WRONGTYPE), which the batch's pcall
-- turns into the -1 outcome.
local locks = math.floor(#KEYS / 3)
local keep = ARGV[3 * locks + 1]
local come = tonumber(ARGV[3 * locks + 2])
-- A waiter found the lock held: the hold's release must wake it
-- (release.lua publishes only then). A server out of memory refuses the
-- mark: the waiter still tries again when the holder's lease ends.
local function mark_waiter(lock)
  local marked = redis.pcall('hset', lock, WAITER_FIELD, 'w')
  if type(marked) == 'table' and marked.err and not string.find(marked.err, '^OOM') then
    error(marked)
  end
end
local function acquire(lock, counter, first, lease, owner, waited)
  -- One read answers the common case: neither the lock nor a claim is there.
  local free = redis.call('exists', lock, first) == 0
  local count, pttl, marked = false, -2, false
  if not free then
    -- The owner's hold count, whether a waiter marked the hold already,
    -- and a read-write lock's mode (never marked: its scripts count fields).
    local got = redis.call('hmget', lock, owner, WAITER_FIELD, 'mode')
    count, marked = got[1], got[2] or got[3]
    if not count then pttl = redis.call('pttl', lock) end
  end
  if not count and pttl == -2 then
    local turn = free and 'pass' or may_pass(first, owner, waited)
    if not turn then
      return 0, math.max(come_now(first, come), 1)
    end
    -- INCR (next_token) is the counter's check: it raises on one that is
    -- not an integer, and gives nothing (undone) from a negative one or one
    -- past the largest exact token.
    local token = next_token(counter)
    if not token then
      return -1, 0
    end
    if free then
      redis.call('hset', lock, owner, '1', TOKEN_FIELD, kept_token(token))
    else
      -- A claim stood: its claimant (or the contenders it refused) waits.
      redis.call('hset', lock, owner, '1', TOKEN_FIELD, kept_token(token), WAITER_FIELD, 'w')
    end
    redis.call('pexpire', lock, lease)
    if turn == 'own' then redis.call('del', first) end
    return 1, token
  end
  if not count then
    local next_turn = waited > 0 and claim(first, owner, waited, keep)
    if not marked then mark_waiter(lock) end
    if next_turn then
      return 3, pttl
    end
    return 0, pttl
  end
  local token = hold_token(lock, counter)
  if not token or not is_hold_count(count) then
    return -1, 0
  end
  redis.call('hincrby', lock, owner, '1')
  lengthen(lock, lease)
  return 2, token
end
-- An error raised for one lock fails that lock alone: a data fault is a
-- wrong type, a refusal is handed back with the server's message, and any
-- other error (the server's own) ends the call.
local function fault(err)
  local kind, message = lock_fault(err)
  if kind == 'data' then return -1, 0 end
  if kind == 'refused' then return -5, message end
  raise_again(err)
end
return each_lock(locks, function(i)
  return acquire(KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i],
    ARGV[3 * i - 2], ARGV[3 * i - 1], tonumber(ARGV[3 * i]) or 0)
end, fault)
