-- lib: lock
-- ARGV: packed session info, sid ('0': allocate one), ttl. Returns {0,
-- sid, end of the last stall (ms, liveclock; 0: none)}: one that ends
-- now, the volume having had no client for a while, included.
local sid = ARGV[2]
if sid == '0' then
	sid = d(redis.call('INCR', 'nextsession'))
end
redis.call('ZADD', 'sessions', now(), sid)
redis.call('HSET', 'sessioninfo', sid, ARGV[1])
-- registered again after a cleanup: a loss stamp left by an older client's
-- cleanup is no news
redis.call('HDEL', 'sessionlost', sid)
local _, stall = live_clock(tonumber(ARGV[3]))
return {0, tonumber(sid), stall}
