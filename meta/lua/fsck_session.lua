-- lib: group
-- ARGV: sid. What session sid, no longer in sessions (EAGAIN when it
-- is again), left in sessionstaged, sessionpending and cache groups
-- (records it holds in any group), removed as the cleanup of a dead
-- session removes it. Returns {0}.
local EAGAIN = @EAGAIN@
local sid = ARGV[1]
if redis.call('ZSCORE', 'sessions', sid) then
	return {EAGAIN}
end
redis.call('HDEL', 'sessionstaged', sid)
redis.call('HDEL', 'sessionmetrics', sid)
local p = redis.call('HGET', 'sessionpending', sid)
if p then
	redis.call('HDEL', 'sessionpending', sid)
	redis.call('DECRBY', 'pendingspace', p)
end
quota_session_drop(sid)
group_drop_session(sid, true)
return {0}
