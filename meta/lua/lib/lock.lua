-- lib: live
-- lock: file locks (meta/meta_lock.h, SCHEMA.md "Locks"). Hash lf<ino>
-- holds the BSD flock locks of an inode, lp<ino> its POSIX record locks;
-- a field per owner, "<sid>_<owner>", its value "<pid> <type> <start>
-- <end>[ <type> <start> <end>...][ <request>]": the owner's ranges,
-- sorted, disjoint, end inclusive; type 1 shared, 2 exclusive; LOCK_EOF
-- stands for "to the end of the file" (a flock lock is the range
-- 0..LOCK_EOF); request, the id of the last lock_set call that changed
-- them (a replay of it is not applied again). Set sl<sid> lists the
-- inodes a session holds locks on, for its cleanup. Whose locks count is
-- the liveness rule of lib/live.lua (which the session scripts take with
-- this lib: their opens go with their locks).
local LOCK_EOF = 4503599627370496 --C: META_LOCK_EOF

-- pid, ranges, request id (nil when the value has none)
local function lock_parse(v)
	local t, rs = {}, {}
	for w in string.gmatch(v, '%S+') do
		t[#t + 1] = tonumber(w)
	end
	for i = 2, #t - 2, 3 do
		rs[#rs + 1] = {t[i], t[i + 1], t[i + 2]}
	end
	if #t % 3 == 2 then
		return t[1], rs, t[#t]
	end
	return t[1], rs, nil
end

local function lock_format(pid, rs, req)
	local p = {d(pid)}
	for _, r in ipairs(rs) do
		p[#p + 1] = d(r[1]) .. ' ' .. d(r[2]) .. ' ' .. d(r[3])
	end
	if req then
		p[#p + 1] = d(req)
	end
	return table.concat(p, ' ')
end

-- A holder whose session is dead (live_floor: silent for ttl seconds of
-- server-running time) holds nothing: its locks stop counting at once,
-- before any cleanup has run.
local lock_live, lock_judged, lock_floor = {}, false, nil
local function lock_alive(sid, ttl)
	if not lock_judged then
		lock_floor, lock_judged = live_floor(ttl), true
	end
	if lock_live[sid] == nil then
		lock_live[sid] = session_alive(sid, lock_floor)
	end
	return lock_live[sid]
end

-- The first range of another live owner in k that conflicts with a lock
-- of type ty on [s, e]: {type, start, end, pid, sid}, or nil. Fields of
-- dead sessions met on the way are dropped.
local function lock_conflict(k, me, ty, s, e, ttl)
	local all = redis.call('HGETALL', k)
	for i = 1, #all, 2 do
		local who = all[i]
		if who ~= me then
			local hsid = string.match(who, '^(%d+)_') or '0'
			if not lock_alive(hsid, ttl) then
				redis.call('HDEL', k, who)
			else
				local pid, rs = lock_parse(all[i + 1])
				for _, r in ipairs(rs) do
					if r[2] <= e and s <= r[3] and
						(ty == 2 or r[1] == 2) then
						return {r[1], r[2], r[3], pid,
							tonumber(hsid)}
					end
				end
			end
		end
	end
	return nil
end

-- rs without [s, e]: a range that covers part of it keeps the rest, in
-- one or two pieces (an unlock of the middle splits a range).
local function lock_cut(rs, s, e)
	local out = {}
	for _, r in ipairs(rs) do
		if r[3] < s or r[2] > e then
			out[#out + 1] = r
		else
			if r[2] < s then
				out[#out + 1] = {r[1], r[2], s - 1}
			end
			if r[3] > e then
				out[#out + 1] = {r[1], e + 1, r[3]}
			end
		end
	end
	return out
end

-- rs (without [s, e]) plus [s, e] of type ty, touching ranges of one
-- type merged.
local function lock_add(rs, ty, s, e)
	rs[#rs + 1] = {ty, s, e}
	table.sort(rs, function(a, b) return a[2] < b[2] end)
	local out = {}
	for _, r in ipairs(rs) do
		local last = out[#out]
		if last and last[1] == r[1] and last[3] + 1 >= r[2] then
			if r[3] > last[3] then
				last[3] = r[3]
			end
		else
			out[#out + 1] = {r[1], r[2], r[3]}
		end
	end
	return out
end

-- fn(k, field) for each lock field of session sid on ino (both tables),
-- until it returns true: then true.
local function lock_each(ino, sid, fn)
	local pre = sid .. '_'
	for _, kind in ipairs({'lf', 'lp'}) do
		local k = key(kind, ino)
		for _, who in ipairs(redis.call('HKEYS', k)) do
			if string.sub(who, 1, #pre) == pre and fn(k, who) then
				return true
			end
		end
	end
	return false
end

-- Does session sid hold any lock on ino?
local function lock_held(ino, sid)
	return lock_each(ino, sid, function() return true end)
end

-- Every lock of session sid on ino goes.
local function lock_drop_session(ino, sid)
	lock_each(ino, sid, function(k, who)
		redis.call('HDEL', k, who)
	end)
end
