-- lib: snap
-- ARGV: top, sid, pos, cursor, budget. Deletes about budget entries of
-- the detached copy, directory by directory from index pos of
-- snapdirs:<top> (a directory's inode once it is empty; subdirectory
-- entries only lose their name: each is in the list itself), files as
-- unlink deletes them (data queued in delfiles). A directory listed
-- with source 0 belongs to a tree handed over whole: its subdirectories
-- are appended as found. Each entry is removed by exactly one call, so
-- a call run twice does no harm. The last call
-- forgets the snapshot. Returns {0, pos, cursor, done}. A tree a restore
-- replaced frees what it deletes in the quotas that counted it (the
-- chain in snapquota:<top>, those of them still there).
local top, sid = tonumber(ARGV[1]), ARGV[2]
local pos, cursor, budget = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
if not snap_own(top, sid, true) then
	return {ECANCELED}
end
local dk, mk, qk = snap_keys(top)
local qc = {}
for q in string.gmatch(redis.call('HGET', qk, 'c') or '', '%d+') do
	if redis.call('HEXISTS', 'quota', q) == 1 then
		qc[#qc + 1] = tonumber(q)
	end
end
while budget > 0 do
	local pair = redis.call('LINDEX', dk, pos)
	if not pair then
		iflush()
		redis.call('HDEL', 'snapshots', d(top))
		redis.call('DEL', dk, mk, qk)
		return {0, pos, '0', 1}
	end
	local sdir, ddir = struct.unpack(PAIR, pair)
	local dd = key('d', ddir)
	repeat
		local r = redis.call('HSCAN', dd, cursor, 'COUNT', budget)
		local e = r[2]
		cursor = r[1]
		budget = budget - #e / 2 - 1
		for i = 1, #e, 2 do
			local ino, ty = dent_unpack(e[i + 1])
			redis.call('HDEL', dd, e[i])
			if ty == DIR and sdir == 0 then
				-- a tree handed over whole (a version, a restore):
				-- its subdirectories join the list as found
				redis.call('RPUSH', dk, struct.pack(PAIR, 0, ino))
			end
			local a = ty ~= DIR and iget(ino)
			if a then
				if a.nlink == 1 then
					quota_add(qc, -qbytes(a), -1)
				end
				if a.nlink > 0 then
					a.nlink = a.nlink - 1
				end
				idirty[ino] = true
				inode_release(ino)
			end
		end
	until cursor == '0' or budget <= 0
	-- an entry a scan missed (not expected: nothing adds any) is
	-- found by scanning again
	if cursor == '0' and redis.call('HLEN', dd) == 0 then
		if iget(ddir) then
			-- the top is not what a restore replaced: the
			-- restored directory keeps its inode
			if ddir ~= top then
				quota_add(qc, 0, -1)
			end
			inode_destroy(ddir)
		end
		pos = pos + 1
	end
end
iflush()
return {0, pos, cursor, 0}
