-- live: the liveness of sessions (SCHEMA.md "Sessions"), for every script
-- that takes a session for dead: those of locks and sessions (lib/lock.lua
-- takes this lib), snap_claim (a snapshot's builder), session_live (the
-- upgrade's check). Not in the prelude: every script would carry it.
--
-- A session is dead once it has not renewed (heartbeat) for ttl seconds
-- of time the server spent running scripts. Hash liveclock: t, the server
-- time (ms) of the last script that judged liveness; s and g, the end and
-- the length (ms) of the last stall, a gap of more than ttl/2 without any
-- such script (live clients heartbeat every ttl/4: a server that goes
-- that long was paused, restarted, failing over, or ran no client at
-- all). The server cannot tell a dead client from one that waited on it:
-- a stall gives every session a fresh ttl from its end.
local function live_clock(ttl)
	local s, ns = now()
	local t = s * 1000 + math.floor(ns / 1000000)
	local c = redis.call('HMGET', 'liveclock', 't', 's')
	local last, stall = tonumber(c[1]), tonumber(c[2]) or 0
	if last and t - last > ttl * 500 then
		stall = t
		redis.call('HSET', 'liveclock', 's', d(t), 'g', d(t - last))
	end
	redis.call('HSET', 'liveclock', 't', d(t))
	return t, stall
end
-- The heartbeat (sessions score, server seconds) below which a session is
-- dead to a caller whose ttl is ttl; nil when none is (a stall ended less
-- than ttl ago).
local function live_floor(ttl)
	local t, stall = live_clock(ttl)
	if stall >= t - ttl * 1000 then
		return nil
	end
	return math.floor(t / 1000) - ttl
end
-- Is session sid in sessions and, with floor (live_floor's), not dead?
local function session_alive(sid, floor)
	local hb = redis.call('ZSCORE', 'sessions', sid)
	if not hb then
		return false
	end
	return floor == nil or tonumber(hb) >= floor
end
