-- lib: snap
-- ARGV: top, sid, pos, cursor, budget, cred. Copies the entries of the
-- directories listed in snapdirs:<top> from index pos (its HSCAN at
-- cursor), about budget entries; a subdirectory gets an empty copy
-- appended to the list, so that the list is the walk's queue; the
-- root's trash is skipped (SCHEMA.md, "Trash"). Returns
-- {0, pos, cursor, done (1: nothing left), files, dirs, others, bytes}.
-- An entry cred may not copy ends the call before its page is copied,
-- what the earlier pages made counted as usual: {EACCES}, and the
-- caller drops the copy.
local top, sid = tonumber(ARGV[1]), ARGV[2]
local pos, cursor, budget = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
cred_use(ARGV[6])
if not snap_own(top, sid, false) then
	return {ECANCELED}
end
local dk, mk = snap_keys(top)
local lmap, done, denied = {}, 0, false
while budget > 0 do
	local pair = redis.call('LINDEX', dk, pos)
	if not pair then
		done = 1
		break
	end
	local sdir, ddir = struct.unpack(PAIR, pair)
	local dd = key('d', ddir)
	-- HSCAN hands out an entry twice only when the hash was resized
	-- between two calls: never inside this script
	local check = cursor ~= '0'
	repeat
		local r = redis.call('HSCAN', key('d', sdir), cursor, 'COUNT',
			budget)
		local e, todo, need, seen = r[2], {}, 0, {}
		cursor = r[1]
		budget = budget - #e / 2 - 1
		if check then
			-- names copied by an earlier call (HMGET in slices:
			-- unpack has a stack limit)
			for i = 1, #e, 512 do
				local names = {}
				for k = i, math.min(i + 510, #e), 2 do
					names[#names + 1] = e[k]
				end
				local got = redis.call('HMGET', dd, unpack(names))
				for k = 1, #names do
					seen[i + 2 * k - 2] = got[k]
				end
			end
		end
		-- first the entries to copy and how many new inodes they
		-- take (a second name of a file copied already takes none)
		for i = 1, #e, 2 do
			local sino = dent_unpack(e[i + 1])
			local v
			-- the trash is no part of the root's tree: never
			-- copied (a restore of the root leaves it alone)
			if not seen[i] and
				not (sdir == 1 and sino == trash_ino()) then
				v = irec(sino)
			end
			if v and not may_copy(v) then
				denied = true
				break
			end
			if v then
				local ty = string.byte(v, 2)
				local t = {name = e[i], sino = sino, v = v, ty = ty}
				if ty ~= DIR and struct.unpack('<I4', v, 13) > 1 then
					t.multi = true
					if not lmap[sino] then
						local c = redis.call('HGET', mk, d(sino))
						lmap[sino] = c and tonumber(c) or 0
						if not c then
							need = need + 1
						end
					end
				else
					need = need + 1
				end
				todo[#todo + 1] = t
			end
		end
		if denied then
			break
		end
		local ino = 0
		if need > 0 then
			ino = redis.call('INCRBY', 'nextinode', need) - need
		end
		for _, t in ipairs(todo) do
			local c = t.multi and lmap[t.sino] or 0
			if c ~= 0 then
				-- another name of a file copied already
				local a = iget(c)
				a.nlink = a.nlink + 1
				idirty[c] = true
				redis.call('HSET', dd, t.name, dent_pack(c, t.ty))
			else
				ino = ino + 1
				if t.ty == DIR then
					clone(t.sino, t.v, ino, 2, ddir)
					redis.call('RPUSH', dk, struct.pack(PAIR,
						t.sino, ino))
					local pa = iget(ddir)
					pa.nlink = pa.nlink + 1
					idirty[ddir] = true
				else
					clone(t.sino, t.v, ino, 1, ddir)
					if t.multi then
						lmap[t.sino] = ino
						redis.call('HSET', mk, d(t.sino), d(ino))
					end
				end
				redis.call('HSET', dd, t.name, dent_pack(ino, t.ty))
			end
		end
	until cursor == '0' or budget <= 0
	if denied then
		break
	end
	if cursor == '0' then
		pos = pos + 1
	end
end
made_flush(top)
iflush()
if denied then
	return {EACCES}
end
local f, nd, o, b = made()
return {0, pos, cursor, done, f, nd, o, b}
