-- ARGV: ttl. Returns {0, {sid...}} of sessions silent for longer than ttl.
local limit = now() - tonumber(ARGV[1])
return {0, redis.call('ZRANGEBYSCORE', 'sessions', '-inf',
	'(' .. d(limit), 'LIMIT', 0, 100)}
