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
--          The caller then judges a cycle closed by a hold of its own
--          client that no guard has (a guard just dropped, an attempt
--          cancelled as it took the lock, a fair lock handed to the caller
--          since its attempt): no deadlock (crates/redlatch/src/deadlock/check.rs).
-- Nothing but KEYS[2] is written; every other key is only read.
-- The walk's work is bounded, not its parties: each holder field examined
-- and each edge read costs one step, STEPS in all (a party with no edge
-- costs its one read and takes nothing from the depth). A walk that runs
-- out of steps reports no cycle (a detection missed, never a false one)
-- and writes the edge; a later check may find the cycle.

local edges = ARGV[3]
local me = string.sub(KEYS[2], #edges + 1)
local max_depth = tonumber(ARGV[2])
local cluster = ARGV[4] == '1'
-- The bound on the walk's work, in steps (see above); keeps one check
-- well under a millisecond's worth of commands per hundred steps.
local STEPS = 2000
local steps = 0
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

-- Whether the field of a lock hash is bookkeeping ('mode', the kept
-- token, the waiters' mark), not a holder.
local function bookkeeping(field)
  return field == 'mode' or field == TOKEN_FIELD or field == WAITER_FIELD
end

-- The holders of `key` now, read once per walk: {fields, parties (a set)}.
-- A lock hash's fields but its bookkeeping, or a string's value (a token
-- lock). Each field costs a step; a hash larger than the steps left is
-- read in part (HSCAN), the walk ends with it.
local read = {}
local function holders(key)
  if read[key] then return read[key] end
  local kind = redis.call('type', key).ok
  local out = {fields = {}, parties = {}}
  local function add(field)
    steps = steps + 1
    if steps > STEPS then return end
    local party = party_of(field)
    out.fields[#out.fields + 1] = field
    out.parties[party] = true
  end
  if kind == 'hash' then
    local left = STEPS - steps
    if left > 0 then
      if redis.call('hlen', key) <= left then
        for _, field in ipairs(redis.call('hkeys', key)) do
          if not bookkeeping(field) then add(field) end
        end
      else
        local page = redis.call('hscan', key, '0', 'COUNT', left)[2]
        for i = 1, #page, 2 do
          if not bookkeeping(page[i]) then add(page[i]) end
        end
      end
    end
  elseif kind == 'string' then
    add(redis.call('get', key))
  end
  read[key] = out
  return out
end

-- The wait-for edge of `party`: the lock it waits for, or nil. A key of
-- another type (left by anything) reads as no edge.
local function edge_of(party)
  steps = steps + 1
  local ok, value = pcall(redis.call, 'get', edges .. party)
  if ok and type(value) == 'string' then return value end
  return nil
end

local tag = hash_tag(KEYS[1])
-- Breadth first: the shortest cycle is named. Each entry, a link:
-- {lock, holder, party, parent entry, depth (locks from the caller)}.
local queue, head = {}, 1
local seen = {}
-- Locks whose holders are in the queue already.
local taken = {}

-- Queues the holders of `lock` after the link `parent`: the closing link
-- if one is the caller's party.
local function reach(lock, parent)
  taken[lock] = true
  local depth = parent and parent[5] + 1 or 1
  for _, holder in ipairs(holders(lock).fields) do
    local party = party_of(holder)
    local link = {lock, holder, party, parent, depth}
    if party == me then return link end
    if not seen[party] then
      seen[party] = true
      queue[#queue + 1] = link
    end
  end
  return nil
end

local closing = reach(KEYS[1], nil)
while not closing and head <= #queue and steps < STEPS do
  local link = queue[head]
  head = head + 1
  if link[5] < max_depth then
    local party = link[3]
    local waits_for = edge_of(party)
    -- A lock reached before: its holders are queued (none the caller's).
    if waits_for and not taken[waits_for] and (not cluster or hash_tag(waits_for) == tag) then
      -- An edge counts only while its party does not hold that lock: a
      -- waiter that has just acquired may not have deleted it yet.
      if not holders(waits_for).parties[party] then
        closing = reach(waits_for, link)
      end
    end
  end
end

if closing then
  local links = {}
  local link = closing
  while link do
    table.insert(links, 1, link)
    link = link[4]
  end
  local cycle = {}
  for _, l in ipairs(links) do
    cycle[#cycle + 1] = l[1]
    cycle[#cycle + 1] = l[2]
    cycle[#cycle + 1] = l[3]
  end
  redis.call('del', KEYS[2])
  return cycle
end
redis.call('set', KEYS[2], KEYS[1], 'px', ARGV[1])
return {}
