-- group: cache groups (meta/meta_group.h, SCHEMA.md "Cache groups"), for
-- the group scripts and the cleanup of a session. Hash cg<name>: field
-- the member's node id (decimal), value its record: u8 version 1, u64
-- sid (the session holding it), u64 weight, i64 joined (server unix
-- seconds), then its address (the rest). Set cgroups: the names of the
-- groups that have a record. Set sg<sid>: "<node>:<group>" of each
-- record session sid holds, what its cleanup visits. Node ids are 64-bit:
-- strings here, never Lua numbers.
local GFMT, GLEN = '<BI8I8i8', 25 --C: _, GROUP_REC_LEN

-- The sid of a member record (a number), nil when it is none.
local function group_rec_sid(v)
	if #v < GLEN or string.byte(v, 1) ~= 1 then
		return nil
	end
	local _, sid = struct.unpack('<BI8', v)
	return sid
end

-- The record of node in group goes when session sid (a number) holds it;
-- the group's name leaves cgroups with its last record.
local function group_drop(group, node, sid)
	local k = 'cg' .. group
	local v = redis.call('HGET', k, node)
	if not v or group_rec_sid(v) ~= sid then
		return
	end
	redis.call('HDEL', k, node)
	redis.call('SREM', 'sg' .. d(sid), node .. ':' .. group)
	if redis.call('EXISTS', k) == 0 then
		redis.call('SREM', 'cgroups', group)
	end
end

-- Every record session sid (decimal) holds goes: those sg<sid> names,
-- and with all, any other of every group (fsck: a cleanup by a client
-- that knew no groups left them).
local function group_drop_session(sid, all)
	local n = tonumber(sid)
	for _, x in ipairs(redis.call('SMEMBERS', 'sg' .. sid)) do
		local node, group = string.match(x, '^(%d+):(.+)$')
		if node then
			group_drop(group, node, n)
		end
	end
	redis.call('DEL', 'sg' .. sid)
	if not all then
		return
	end
	for _, g in ipairs(redis.call('SMEMBERS', 'cgroups')) do
		local r = redis.call('HGETALL', 'cg' .. g)
		for i = 1, #r, 2 do
			if group_rec_sid(r[i + 1]) == n then
				group_drop(g, r[i], n)
			end
		end
	end
end
