-- ARGV: packed session info, sid ('0': allocate one). Returns {0, sid}.
local sid = ARGV[2]
if sid == '0' then
	sid = d(redis.call('INCR', 'nextsession'))
end
redis.call('ZADD', 'sessions', now(), sid)
redis.call('HSET', 'sessioninfo', sid, ARGV[1])
return {0, tonumber(sid)}
