-- lib: live
-- lib: group
-- ARGV: group, node (decimal), sid, weight, address, ttl. Session sid
-- enters group as node: the record of node is replaced when this session
-- or a dead one (live_floor) holds it. Returns {0, 1} joined; {EEXIST}
-- when a live session other than sid holds node (the same cache mounted
-- twice); {0, 2} when sid itself is gone or dead (nothing changed: it
-- renews and sends again).
local group, node, sid = ARGV[1], ARGV[2], ARGV[3]
local floor = live_floor(tonumber(ARGV[6]))
if not session_alive(sid, floor) then
	return {0, 2}
end
local k = 'cg' .. group
local v = redis.call('HGET', k, node)
local holder = v and group_rec_sid(v)
if holder and d(holder) ~= sid then
	if session_alive(d(holder), floor) then
		return {EEXIST}
	end
	redis.call('SREM', 'sg' .. d(holder), node .. ':' .. group)
end
local t = now()
redis.call('HSET', k, node,
	struct.pack(GFMT, 1, tonumber(sid), tonumber(ARGV[4]), t) .. ARGV[5])
redis.call('SADD', 'cgroups', group)
redis.call('SADD', 'sg' .. sid, node .. ':' .. group)
return {0, 1}
