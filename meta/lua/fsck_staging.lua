-- ARGV: sid, names ('b<id>_<idx>', 'p<pack>'). Names in staging of
-- session sid, which is no longer in sessions (EAGAIN when it is again),
-- released as staging_done releases them: a dead record parked for them
-- goes back to delslices. Should the node put the objects later, they are
-- gc's leaks. A name some other session holds now is left. Returns {0}.
local EAGAIN = @EAGAIN@
local sid = ARGV[1]
if redis.call('ZSCORE', 'sessions', sid) then
	return {EAGAIN}
end
for i = 2, #ARGV do
	if redis.call('HGET', 'staging', ARGV[i]) == sid then
		staging_release(ARGV[i])
	end
end
return {0}
