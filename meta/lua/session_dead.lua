-- lib: lock
-- ARGV: ttl. Returns {0, {sid...}}: up to 100 sessions dead to a caller
-- with that ttl (live_floor: silent for ttl of server-running time).
local floor = live_floor(tonumber(ARGV[1]))
if not floor then
	return {0, {}}
end
return {0, redis.call('ZRANGEBYSCORE', 'sessions', '-inf',
	'(' .. d(floor), 'LIMIT', 0, 100)}
