-- ARGV: sid. Returns {0, 1}, or {0, 0} when the session was cleaned away.
if not redis.call('ZSCORE', 'sessions', ARGV[1]) then
	return {0, 0}
end
redis.call('ZADD', 'sessions', now(), ARGV[1])
return {0, 1}
