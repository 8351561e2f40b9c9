-- lib: snap
-- lib: live
-- ARGV: top, sid, ttl, own ('1': the builder gives up its snapshot).
-- Marks the snapshot as being dropped by sid, atomically, so that one
-- dropper at a time works on it and its builder (if alive after all)
-- stops. Without own, only an abandoned one is taken: untouched for ttl
-- seconds of time the server ran scripts, and its builder's session dead
-- (lib/live.lua; or none, or the caller's): a stall of the server, in
-- which no builder could go on, takes no snapshot from one. Returns {0},
-- ENOENT, EBUSY (still in use) or ECANCELED (not the builder's any more).
local top, sid, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local osid, t, dr = snap_state(top)
if not osid then
	return {ENOENT}
end
if ARGV[4] == '1' then
	if osid ~= sid or dr then
		return {ECANCELED}
	end
else
	local floor = live_floor(ttl)
	if not floor or t >= floor then
		return {EBUSY}
	end
	if osid ~= '0' and osid ~= sid and session_alive(osid, floor) then
		return {EBUSY}
	end
end
snap_set(top, sid, true)
return {0}
