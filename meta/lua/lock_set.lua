-- lib: lock
-- ARGV: kind ('f' flock, 'p' POSIX), ino, sid, owner, type (0 unlock, 1
-- shared, 2 exclusive), start, end, pid, ttl. The conflict check and the
-- change in one step: {0, 0} done, or {0, 1, type, start, end, pid, sid}
-- of a lock of another owner that stands in the way (nothing changed).
-- An owner never conflicts with itself: its ranges are cut and re-merged.
local kind, ino, sid = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local me = sid .. '_' .. ARGV[4]
local ty, s, e = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local pid, ttl = tonumber(ARGV[8]), tonumber(ARGV[9])
if (kind ~= 'f' and kind ~= 'p') or ty < 0 or ty > 2 or s > e then
	return {EINVAL}
end
local k = key('l' .. kind, ino)
if ty ~= 0 then
	local c = lock_conflict(k, me, ty, s, e, ttl)
	if c then
		return {0, 1, c[1], c[2], c[3], c[4], c[5]}
	end
end
local v = redis.call('HGET', k, me)
local rs, old = {}, nil
if v then
	old, rs = lock_parse(v)
end
rs = lock_cut(rs, s, e)
if ty ~= 0 then
	rs = lock_add(rs, ty, s, e)
end
if #rs > 0 then
	redis.call('HSET', k, me, lock_format(ty ~= 0 and pid or old, rs))
	redis.call('SADD', 'sl' .. sid, ino)
elseif v then
	redis.call('HDEL', k, me)
	if not lock_held(ino, sid) then
		redis.call('SREM', 'sl' .. sid, ino)
	end
end
return {0, 0}
