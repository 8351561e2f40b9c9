-- lib: snap
-- ARGV: top, sid, ttl, own ('1': the builder gives up its snapshot).
-- Marks the snapshot as being dropped by sid, atomically, so that one
-- dropper at a time works on it and its builder (if alive after all)
-- stops. Without own, only an abandoned one is taken: untouched for
-- longer than ttl, and its builder without a live session (or without
-- any, or the caller's). Returns {0}, ENOENT, EBUSY (still in use)
-- or ECANCELED (not the builder's any more).
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
	local s = now()
	if s - t <= ttl then
		return {EBUSY}
	end
	if osid ~= '0' and osid ~= sid then
		local hb = redis.call('ZSCORE', 'sessions', osid)
		if hb and tonumber(hb) >= s - ttl then
			return {EBUSY}
		end
	end
end
snap_set(top, sid, true)
return {0}
