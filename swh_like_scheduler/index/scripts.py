"""The Lua scripts of the Redis index, each run atomically by Redis.

Keys of one task type, in this order (:class:`.redis_index.TypeKeys`):
``state``, ``wait``, ``meta``, ``claimed``, ``ready`` of the classes high,
normal and low, then ``rebuild`` and ``pages`` (a rebuild under way). A ``meta``
value is ``"<class rank> <deadline>"``.
"""

from __future__ import annotations

#: KEYS: the type's keys. ARGV: now, limit, stuck_at, most entries to move
#: from ``wait`` to ``ready`` in this call, the class ranks to serve in
#: order ("012"), ``1`` to pop even if matured entries remain (else ``0``).
#: Moves up to that many entries whose can_start_by has passed to their
#: class's ready set (scored by deadline). If matured entries remain in
#: ``wait`` (and popping is not forced), returns ``{1, {}}``: the caller
#: calls again, and no call pops before every matured entry is ready, so
#: the pop sees the same ready tasks as the database. Else pops up to
#: ``limit`` of the earliest deadlines, class by class, into ``claimed``
#: (scored by ``stuck_at``) and returns ``{0, ids}``; false while the
#: type's index is not complete. Each Redis command takes a thousand
#: members at a time (Lua's ``unpack`` has a limit of a few thousand
#: values), not one.
CLAIM = """
if redis.call('HGET', KEYS[1], 'synced') ~= '1' then
  return false
end
local moves = tonumber(ARGV[4])
local matured = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, moves)
for first = 1, #matured, 1000 do
  local ids = {unpack(matured, first, math.min(first + 999, #matured))}
  redis.call('ZREM', KEYS[2], unpack(ids))
  local metas = redis.call('HMGET', KEYS[3], unpack(ids))
  local by_rank = {{}, {}, {}}
  for j, id in ipairs(ids) do
    if metas[j] then
      local rank, deadline = string.match(metas[j], '^(%d) (.+)$')
      local into = by_rank[tonumber(rank) + 1]
      into[#into + 1] = deadline
      into[#into + 1] = id
    end
  end
  for r = 1, 3 do
    if #by_rank[r] > 0 then
      redis.call('ZADD', KEYS[4 + r], unpack(by_rank[r]))
    end
  end
end
if #matured >= moves and ARGV[6] ~= '1' then
  if #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 1) > 0 then
    return {1, {}}
  end
end
local limit = tonumber(ARGV[2])
local out, claimed = {}, {}
for i = 1, #ARGV[5] do
  local want = limit - #out
  if want <= 0 then
    break
  end
  local popped = redis.call('ZPOPMIN', KEYS[5 + tonumber(string.sub(ARGV[5], i, i))], want)
  for j = 1, #popped, 2 do
    out[#out + 1] = popped[j]
    claimed[#claimed + 1] = ARGV[3]
    claimed[#claimed + 1] = popped[j]
  end
end
for first = 1, #claimed, 2000 do
  redis.call('ZADD', KEYS[4], unpack(claimed, first, math.min(first + 1999, #claimed)))
end
return {0, out}
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

#: The rebuild scripts share out one rebuild of a type among every process
#: that joins it (:mod:`.rebuild`). ``rebuild`` (a hash) holds its token,
#: its ``cursor`` (where the next page starts, in the order high class to
#: low, then deadline and id; ``end`` once every page is handed out), who
#: holds the cursor until when (``held_until``, ms) and how many tasks were
#: ``filed``, and when a process last joined it (``seen``, ms). ``pages``
#: holds the pages handed out and not yet filed, scored
#: by the end of their lease (ms): a page whose process died is handed out
#: again.

#: KEYS: the type's keys. ARGV: a new token, now (ms), the lease (ms), the
#: cursor a new rebuild starts from.
#: Starts a rebuild unless one is under way (empties the type's index,
#: which is not used until the rebuild is done), then gives the caller its
#: next step: ``{'done'}`` (the index is complete; ``{'done', token}``
#: if this call completed it: the last page was empty), ``{'page', token,
#: page}`` (a page whose lease ran out: read and file it again),
#: ``{'cursor', token, cursor}`` (the cursor is the caller's until the
#: lease ends: read the page from it, then :data:`ADVANCE`), ``{'busy',
#: token}`` (another process holds the cursor: ask again shortly) or
#: ``{'wait', token}`` (every page is handed out, some not yet filed).
JOIN = """
if redis.call('HGET', KEYS[1], 'synced') == '1' then
  return {'done'}
end
local token = redis.call('HGET', KEYS[1], 'building')
if not token or redis.call('HGET', KEYS[8], 'token') ~= token then
  token = ARGV[1]
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
  redis.call('HSET', KEYS[1], 'building', token)
  redis.call('HSET', KEYS[8], 'token', token, 'cursor', ARGV[4], 'filed', 0, 'started', ARGV[2])
end
redis.call('HSET', KEYS[8], 'seen', ARGV[2])
local now = tonumber(ARGV[2])
local lease = now + tonumber(ARGV[3])
local late = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', now, 'LIMIT', 0, 1)
if #late > 0 then
  redis.call('ZADD', KEYS[9], lease, late[1])
  return {'page', token, late[1]}
end
local cursor = redis.call('HGET', KEYS[8], 'cursor')
if cursor == 'end' then
  if redis.call('ZCARD', KEYS[9]) == 0 then
    redis.call('HDEL', KEYS[1], 'building')
    redis.call('HSET', KEYS[1], 'synced', '1')
    return {'done', token}
  end
  return {'wait', token}
end
if tonumber(redis.call('HGET', KEYS[8], 'held_until') or '0') > now then
  return {'busy', token}
end
redis.call('HSET', KEYS[8], 'held_until', lease)
return {'cursor', token, cursor}
"""

#: KEYS: the type's keys. ARGV: the token, now (ms), the lease (ms), the
#: cursor the caller read from, the next cursor, the page read ('' if it
#: was empty). Moves the cursor and hands the page to the caller; 0 if the
#: rebuild is no longer the caller's (another began, or another process
#: moved the cursor after the caller's hold ran out): the page is dropped.
ADVANCE = """
if redis.call('HGET', KEYS[1], 'building') ~= ARGV[1]
    or redis.call('HGET', KEYS[8], 'cursor') ~= ARGV[4] then
  return 0
end
redis.call('HSET', KEYS[8], 'cursor', ARGV[5])
redis.call('HDEL', KEYS[8], 'held_until')
if ARGV[6] ~= '' then
  redis.call('ZADD', KEYS[9], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[6])
end
return 1
"""

#: KEYS: the type's keys. ARGV: the token, a page, how many tasks it
#: filed. The page is filed: 2 if that completed the index (it is used from
#: now on), 1 if pages remain, 0 if the rebuild is no longer this one.
DONE = """
if redis.call('HGET', KEYS[1], 'building') ~= ARGV[1] then
  return 0
end
redis.call('ZREM', KEYS[9], ARGV[2])
redis.call('HINCRBY', KEYS[8], 'filed', tonumber(ARGV[3]))
if redis.call('HGET', KEYS[8], 'cursor') == 'end' and redis.call('ZCARD', KEYS[9]) == 0 then
  redis.call('HDEL', KEYS[1], 'building')
  redis.call('HSET', KEYS[1], 'synced', '1')
  return 2
end
return 1
"""

#: KEYS: the type's keys. ARGV: now, then ids (at most a few thousand):
#: ready tasks as the database lists them. Returns those the index would
#: not hand out by ``now``: in no ready set, not in ``claimed``, and not in
#: ``wait`` at ``now`` or earlier; false while the index is not complete.
LACKING = """
if redis.call('HGET', KEYS[1], 'synced') ~= '1' then
  return false
end
local now = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local found = redis.call('ZSCORE', KEYS[4], id)
  for k = 5, 7 do
    if not found then
      found = redis.call('ZSCORE', KEYS[k], id)
    end
  end
  if not found then
    local at = redis.call('ZSCORE', KEYS[2], id)
    found = at and tonumber(at) <= now
  end
  if not found then
    out[#out + 1] = id
  end
end
return out
"""
