-- lib: lock
-- ARGV: kind ('f' flock, 'p' POSIX), ino, sid, owner, type (0 unlock, 1
-- shared, 2 exclusive), start, end, pid, ttl, request id, floor (the
-- client's request ids: increasing; the floor is the lowest of a call of
-- the client not finished yet; 0 or none: not checked). The conflict
-- check and the change in one step: {0, 0, held} done (held: 1 when the
-- owner is left holding a range of the inode, else 0), {0, 1, type,
-- start, end, pid, sid} of a lock of another owner that stands in the way
-- (nothing changed), or {0, 2}: the caller's own session is dead
-- (lock_alive) and must renew first (nothing changed). An owner never
-- conflicts with itself: its ranges are cut and re-merged.
-- Replays: a request whose id is not above the last one that changed the
-- owner's ranges was applied already (the client sent it again after a
-- lost reply, before any other call of the owner: meta/redis_lock.c), one
-- whose id is below the highest floor of the session (lockfloor) is a
-- stale copy of a call that finished: either is answered done and changes
-- nothing.
local kind, ino, sid = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local me = sid .. '_' .. ARGV[4]
local ty, s, e = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local pid, ttl = tonumber(ARGV[8]), tonumber(ARGV[9])
local req, floor = tonumber(ARGV[10] or '0'), tonumber(ARGV[11] or '0')
if (kind ~= 'f' and kind ~= 'p') or ty < 0 or ty > 2 or s > e then
	return {EINVAL}
end
local k = key('l' .. kind, ino)
local v = redis.call('HGET', k, me)
local rs, old, last = {}, nil, nil
if v then
	old, rs, last = lock_parse(v)
end
if req > 0 then
	local f = tonumber(redis.call('HGET', 'lockfloor', sid) or '0')
	if req < f or (last and req <= last) then
		return {0, 0, #rs > 0 and 1 or 0}
	end
	if floor > f then
		redis.call('HSET', 'lockfloor', sid, d(floor))
	end
end
if not lock_alive(sid, ttl) then
	return {0, 2}
end
if ty ~= 0 then
	local c = lock_conflict(k, me, ty, s, e, ttl)
	if c then
		return {0, 1, c[1], c[2], c[3], c[4], c[5]}
	end
end
rs = lock_cut(rs, s, e)
if ty ~= 0 then
	rs = lock_add(rs, ty, s, e)
end
if #rs > 0 then
	redis.call('HSET', k, me, lock_format(ty ~= 0 and pid or old, rs,
		req > 0 and req or last))
	redis.call('SADD', 'sl' .. sid, ino)
elseif v then
	redis.call('HDEL', k, me)
	if not lock_held(ino, sid) then
		redis.call('SREM', 'sl' .. sid, ino)
	end
end
return {0, 0, #rs > 0 and 1 or 0}
