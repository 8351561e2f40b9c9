-- lib: lock
-- lib: group
-- ARGV: sid, ttl (-1: unconditionally, the session's own close), max opens
-- to drop (and max inodes whose locks to drop) in this call. Returns {0,
-- state}: 0 nothing done (gone, or alive again: live_floor), 1 session
-- removed, 2 more opens or locks left (call again).
local sid, ttl, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local hb = redis.call('ZSCORE', 'sessions', sid)
if ttl >= 0 and (not hb or session_alive(sid, live_floor(ttl))) then
	return {0, 0}
end
for _, i in ipairs(redis.call('SPOP', 'so' .. sid, max)) do
	local ino = tonumber(i)
	redis.call('HDEL', key('o', ino), sid)
	inode_release(ino)
end
iflush()
-- its file locks go with it (other clients already ignore those of a
-- dead session: lock_alive)
for _, i in ipairs(redis.call('SPOP', 'sl' .. sid, max)) do
	lock_drop_session(tonumber(i), sid)
end
if redis.call('SCARD', 'so' .. sid) > 0 or
	redis.call('SCARD', 'sl' .. sid) > 0 then
	return {0, 2}
end
-- its cache group memberships (lib/group.lua)
group_drop_session(sid)
redis.call('ZREM', 'sessions', sid)
redis.call('HDEL', 'sessioninfo', sid)
redis.call('HDEL', 'sessionstaged', sid)
redis.call('HDEL', 'sessionmetrics', sid)
redis.call('HDEL', 'sessionlost', sid)
redis.call('HDEL', 'lockfloor', sid)
local p = redis.call('HGET', 'sessionpending', sid)
if p then
	redis.call('HDEL', 'sessionpending', sid)
	redis.call('DECRBY', 'pendingspace', p)
end
quota_session_drop(sid)
return {0, hb and 1 or 0}
