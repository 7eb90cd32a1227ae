-- memory: what a script run by EVAL does on a server out of memory
-- (`maxmemory` reached under `noeviction`). Redis refuses there a script's
-- first write whose command may take memory (HINCRBY, INCRBY, ZADD...) and
-- lets every later write through; a function carries the flag `allow-oom`
-- instead, and never meets these refusals.

-- Runs a write that takes no memory (a hold count lowered, a count of
-- permits given back, an expiry moved) on `key`, which exists, even there:
-- when the server refuses it, RENAME of the key onto itself (a write that
-- changes nothing, is not replicated and takes no memory) goes first, and
-- the write again. Other errors are raised as they came.
local function give_back(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then
    if not string.find(reply.err, '^OOM') then error(reply) end
    redis.call('rename', key, key)
    return redis.call(command, key, ...)
  end
  return reply
end

-- Runs a write that only helps (a place in a waiting line, a waiting
-- writer's claim): false, and nothing written, when the server refuses it
-- for memory (only a first write is refused, so nothing was written before
-- it either). Other errors are raised as they came.
local function unless_out_of_memory(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then
    if not string.find(reply.err, '^OOM') then error(reply) end
    return false
  end
  return reply
end
