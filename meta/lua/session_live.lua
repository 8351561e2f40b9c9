-- lib: live
-- ARGV: ttl. Returns {0, n}: the sessions alive to a caller with that ttl
-- (lib/live.lua: all of them while a stall of the server is less than ttl
-- behind), for the upgrade's check that no client has the volume mounted.
local floor = live_floor(tonumber(ARGV[1]))
if not floor then
	return {0, redis.call('ZCARD', 'sessions')}
end
return {0, redis.call('ZCOUNT', 'sessions', d(floor), '+inf')}
