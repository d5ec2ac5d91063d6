"""The Lua scripts of the Redis index, each run atomically by Redis.

Keys of one task type, in this order (:class:`.redis_index.TypeKeys`):
``state``, ``wait``, ``meta``, ``claimed``, ``ready`` of the classes high,
normal and low, then ``rebuild`` (the lease of a rebuild). A ``meta``
value is ``"<class rank> <deadline>"``.
"""

from __future__ import annotations

#: KEYS: the type's keys. ARGV: now, limit, stuck_at, most entries to move
#: from ``wait`` to ``ready``, the class ranks to serve in order ("012").
#: Moves the entries whose can_start_by has passed to their class's ready
#: set (scored by deadline), then pops up to ``limit`` of the earliest
#: deadlines, class by class, into ``claimed`` (scored by ``stuck_at``).
#: Returns the ids, or false while the type's index is not complete.
CLAIM = """
if redis.call('HGET', KEYS[1], 'synced') ~= '1' then
  return false
end
local matured = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(matured) do
  redis.call('ZREM', KEYS[2], id)
  local meta = redis.call('HGET', KEYS[3], id)
  if meta then
    local rank, deadline = string.match(meta, '^(%d) (.+)$')
    redis.call('ZADD', KEYS[5 + tonumber(rank)], deadline, id)
  end
end
local limit = tonumber(ARGV[2])
local out = {}
for i = 1, #ARGV[5] do
  local want = limit - #out
  if want <= 0 then
    break
  end
  local popped = redis.call('ZPOPMIN', KEYS[5 + tonumber(string.sub(ARGV[5], i, i))], want)
  for j = 1, #popped, 2 do
    out[#out + 1] = popped[j]
    redis.call('ZADD', KEYS[4], ARGV[3], popped[j])
  end
end
return out
"""

#: KEYS: the type's keys. ARGV: id, next_run, meta, id, next_run, meta...
#: (at most a few thousand). Puts each task in ``wait`` at its can_start_by
#: (out of any other set), a few commands for the whole batch.
UPSERT = """
local ids, scores, metas = {}, {}, {}
for i = 1, #ARGV, 3 do
  ids[#ids + 1] = ARGV[i]
  scores[#scores + 1] = ARGV[i + 1]
  scores[#scores + 1] = ARGV[i]
  metas[#metas + 1] = ARGV[i]
  metas[#metas + 1] = ARGV[i + 2]
end
if #ids == 0 then
  return 0
end
for k = 4, 7 do
  redis.call('ZREM', KEYS[k], unpack(ids))
end
redis.call('ZADD', KEYS[2], unpack(scores))
redis.call('HSET', KEYS[3], unpack(metas))
return #ids
"""

#: KEYS: the type's keys. ARGV: ids (at most a few thousand). Takes the
#: tasks out of the index.
REMOVE = """
if #ARGV == 0 then
  return 0
end
for k = 2, 7 do
  if k ~= 3 then
    redis.call('ZREM', KEYS[k], unpack(ARGV))
  end
end
redis.call('HDEL', KEYS[3], unpack(ARGV))
return #ARGV
"""

#: KEYS: the type's keys. ARGV: now, most ids. The claimed ids whose claim
#: went stuck (no runner settled them in time), taken out of ``claimed``.
STUCK = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[4], id)
end
return ids
"""

#: KEYS: the type's keys. ARGV: a token, the rebuild's lease in ms. Starts
#: a rebuild unless another one holds the lease (returns 0): empties the
#: type's index, which is not used (no ``synced``) until :data:`FINISH`
#: with the same token.
BEGIN = """
if not redis.call('SET', KEYS[8], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
redis.call('HDEL', KEYS[1], 'synced')
redis.call('HSET', KEYS[1], 'building', ARGV[1])
return 1
"""

#: KEYS: the type's keys. ARGV: the token of :data:`BEGIN`, the lease in
#: ms. Extends the rebuild's lease while it goes on (0: it was lost).
RENEW = """
if redis.call('GET', KEYS[8]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[8], tonumber(ARGV[2]))
return 1
"""

#: KEYS: the type's keys. ARGV: the token of :data:`BEGIN`. Marks the
#: index complete, unless it was emptied (or another rebuild began) since:
#: a rebuild that lost part of its writes must not be trusted.
FINISH = """
if redis.call('HGET', KEYS[1], 'building') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'building')
redis.call('HSET', KEYS[1], 'synced', '1')
if redis.call('GET', KEYS[8]) == ARGV[1] then
  redis.call('DEL', KEYS[8])
end
return 1
"""
