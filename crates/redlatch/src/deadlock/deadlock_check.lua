-- deadlock_check: run right after an acquire attempt answered busy. Walks
-- the wait-for graph from the holders of the lock the caller waits for; if
-- the walk comes back to the caller's own party, the wait would close a
-- cycle: returns it and writes no edge (only the closer is refused). Else
-- writes the caller's wait-for edge and returns an empty list.
-- KEYS[1]  the lock key the caller waits for (a lock hash, or a token
--          lock's string whose value is its owner field)
-- KEYS[2]  the caller's wait-for edge: ARGV[3] .. the caller's party
--          (crates/redlatch/src/deadlock/party.rs)
-- ARGV[1]  how long the edge lives, in ms
-- ARGV[2]  the longest cycle looked for, in locks
-- ARGV[3]  what every wait-for edge key of this walk starts with: the key
--          prefix and 'redlatch_wait:' (one server), and '{TAG}:' after it
--          on a Redis Cluster
-- ARGV[4]  '1' on a Redis Cluster: only locks of KEYS[1]'s hash tag are
--          followed (a script reaches one slot)
-- Returns  {} no cycle (the edge written), or the cycle, flat:
--          {lock1, holder1, party1, lock2, holder2, party2, ...}: the caller
--          waits for lock1, held by holder1 of party1, which waits for
--          lock2, ...; the last party is the caller's. The edge deleted.
--          The caller judges a cycle of its own holds (the last holder its
--          own owner field, a lock handed to it since its attempt; or a
--          hold of its client no guard has, being given back): no deadlock.
-- Nothing but KEYS[2] is written; every other key is only read.

local edges = ARGV[3]
local me = string.sub(KEYS[2], #edges + 1)
local max_depth = tonumber(ARGV[2])
local cluster = ARGV[4] == '1'
-- A bound on the edges read, whatever the graph's shape.
local MAX_VISITS = 256
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'

-- The hash tag Redis Cluster hashes `key` on, or nil.
local function hash_tag(key)
  local tag = string.match(key, '^[^{]*{([^}]*)}')
  if tag == '' then return nil end
  return tag
end

-- The party of an owner field: the rules of deadlock/party.rs, `party_of`.
local function party_of(field)
  local f = field
  if string.sub(f, -6) == ':write' then f = string.sub(f, 1, -7) end
  if #f <= 37 or string.sub(f, 37, 37) ~= ':' or not string.match(string.sub(f, 1, 36), UUID) then
    return field
  end
  local client, rest = string.sub(f, 1, 36), string.sub(f, 38)
  if string.sub(rest, 1, 1) == '#' then
    local at = string.find(rest, '@', 2, true)
    if at and at < #rest then return client .. '@' .. string.sub(rest, at + 1) end
    return f
  end
  if string.match(rest, '^%d+$') then return f end
  return 'n:' .. rest
end

-- The owner fields holding `key` now: a lock hash's fields but its
-- bookkeeping ('mode', the kept token, the waiters' mark), or a string's
-- value (a token lock).
local function holders(key)
  local kind = redis.call('type', key).ok
  local out = {}
  if kind == 'hash' then
    for _, field in ipairs(redis.call('hkeys', key)) do
      if field ~= 'mode' and field ~= TOKEN_FIELD and field ~= WAITER_FIELD then
        out[#out + 1] = field
      end
    end
  elseif kind == 'string' then
    out[1] = redis.call('get', key)
  end
  return out
end

local tag = hash_tag(KEYS[1])
-- Breadth first: the shortest cycle is named. Each entry: a party and the
-- path to it ({lock, holder, party, ...}).
local queue, head = {}, 1
local seen = {}
local visits = 0

-- Takes the holders of `lock` after `path`: the cycle if one is the caller's party.
local function reach(lock, path)
  for _, holder in ipairs(holders(lock)) do
    local party = party_of(holder)
    local next_path = {}
    for i = 1, #path do next_path[i] = path[i] end
    next_path[#next_path + 1] = lock
    next_path[#next_path + 1] = holder
    next_path[#next_path + 1] = party
    if party == me then return next_path end
    if not seen[party] then
      seen[party] = true
      queue[#queue + 1] = next_path
    end
  end
  return nil
end

local cycle = reach(KEYS[1], {})
while not cycle and head <= #queue and visits < MAX_VISITS do
  local path = queue[head]
  head = head + 1
  if #path / 3 < max_depth then
    local party = path[#path]
    visits = visits + 1
    local waits_for = redis.call('get', edges .. party)
    if waits_for and (not cluster or hash_tag(waits_for) == tag) then
      -- An edge counts only while its party does not hold that lock: a
      -- waiter that has just acquired may not have deleted it yet.
      local holds = false
      for _, holder in ipairs(holders(waits_for)) do
        if party_of(holder) == party then holds = true break end
      end
      if not holds then cycle = reach(waits_for, path) end
    end
  end
end

if cycle then
  redis.call('del', KEYS[2])
  return cycle
end
redis.call('set', KEYS[2], KEYS[1], 'px', ARGV[1])
return {}
