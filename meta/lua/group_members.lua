-- lib: live
-- lib: group
-- ARGV: group, ttl. Returns {0, node, record, heartbeat, ...}: the
-- records of group whose session is alive to a caller with that ttl
-- (live_floor: all of them while a stall of the server is less than ttl
-- behind), each with its session's last heartbeat (server seconds), in
-- the hash's order. Records of dead sessions are left to their cleanup.
local floor = live_floor(tonumber(ARGV[2]))
local r = redis.call('HGETALL', 'cg' .. ARGV[1])
local out = {0}
for i = 1, #r, 2 do
	local sid = group_rec_sid(r[i + 1])
	local hb = sid and redis.call('ZSCORE', 'sessions', d(sid))
	if hb and (floor == nil or tonumber(hb) >= floor) then
		out[#out + 1] = r[i]
		out[#out + 1] = r[i + 1]
		out[#out + 1] = tonumber(hb)
	end
end
return out
