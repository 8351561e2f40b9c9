-- lib: lock
-- ARGV: sid, ttl[, uuid, restore_id]. Renews session sid. Returns {0,
-- state, lost, stall end, stall length, dead sid...}: state 1 renewed, 0
-- the session was cleaned away (register it again). lost: when the
-- session was last found dead (ms; 0: never), in sessionlost: it had been
-- silent for ttl of server-running time (live_floor), others stopped
-- counting its locks and may hold them now, so what was left of them went
-- then (the locks of up to 1000 inodes) and none counts again; a client
-- that sees a new value has lost its locks (a reply lost and sent again
-- still tells it). stall: the last stall of liveclock (ms; 0, 0 when
-- none). dead: up to 100 sessions dead to this caller, for it to clean
-- up. With uuid (and restore_id, '' for none), the volume the session
-- serves: when the settings hold another (restored from a dump: another
-- restore_id; the database emptied: none; another volume formatted
-- there), nothing is done, not even the liveness clock moved, and the
-- reply is {0, 2, uuid, restore_id} as the settings have them ('' when
-- absent).
local sid, ttl = ARGV[1], tonumber(ARGV[2])
if ARGV[3] then
	local v = redis.call('HMGET', 'setting', 'uuid', 'restore_id')
	local u, r = v[1] or '', v[2] or ''
	if u ~= ARGV[3] or r ~= (ARGV[4] or '') then
		return {0, 2, u, r}
	end
end
local floor = live_floor(ttl)
local hb = redis.call('ZSCORE', 'sessions', sid)
local state = 1
if not hb then
	state = 0
else
	if floor and tonumber(hb) < floor then
		for _, i in ipairs(redis.call('SPOP', 'sl' .. sid, 1000)) do
			lock_drop_session(tonumber(i), sid)
		end
		local s, ns = now()
		redis.call('HSET', 'sessionlost', sid,
			d(s * 1000 + math.floor(ns / 1000000)))
	end
	redis.call('ZADD', 'sessions', now(), sid)
end
local c = redis.call('HMGET', 'liveclock', 's', 'g')
local out = {0, state,
	tonumber(redis.call('HGET', 'sessionlost', sid) or '0'),
	tonumber(c[1]) or 0, tonumber(c[2]) or 0}
if floor then
	for _, x in ipairs(redis.call('ZRANGEBYSCORE', 'sessions', '-inf',
		'(' .. d(floor), 'LIMIT', 0, 100)) do
		out[#out + 1] = tonumber(x)
	end
end
return out
