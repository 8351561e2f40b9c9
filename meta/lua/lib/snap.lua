-- snapshot helpers: put between the prelude and the snapshot scripts (those
-- whose first line is `-- lib: snap`), so that the other scripts do not
-- carry them. A snapshot of a directory is built detached across many
-- calls: `snapshots` names its top inode with the builder's "<sid>:<time>"
-- (":d" appended once it is being dropped), `snapdirs:<top>` lists every
-- directory of the copy with its source (the walk's queue, then the drop's
-- list), `snapmap:<top>` maps source files with more than one name to their
-- copy, `snapquota:<top>` counts what the copy holds for the quotas of
-- its destination (s stored bytes, i inodes; c: the chain a drop frees).
local ECANCELED, EACCES = @ECANCELED@, @EACCES@
local PAIR = '<I8I8'
-- the caller's uid and groups (ARGV: u32 uid, then u32 groups, little
-- endian; empty: no checks), set by cred_use at the start of a call
local cuid, cgid, cgroups
local function cred_use(s)
	cuid, cgid, cgroups = nil, nil, {}
	if s and #s >= 8 then
		cuid, cgid = struct.unpack('<I4I4', s, 1)
		for o = 5, #s - 3, 4 do
			cgroups[struct.unpack('<I4', s, o)] = true
		end
	end
end
-- may the caller copy inode record v as cp -a would: a file readable,
-- a directory readable and searchable, anything else as it is
local function may_copy(v)
	if not cuid or cuid == 0 then
		return true
	end
	local ty, mode, uid, gid = struct.unpack('<BHI4I4', v, 2)
	local want = ty == DIR and 5 or (ty == FILE and 4 or 0)
	local bits = mode % 8
	if uid == cuid then
		bits = math.floor(mode / 64) % 8
	elseif cgroups[gid] then
		bits = math.floor(mode / 8) % 8
	end
	return bit.band(bits, want) == want
end
-- record v as a copy made by the caller: cp -a run by a user keeps
-- owner and group only where it may (its own uid, a group it is in),
-- else they become its own and the set-id bits go
local function owned(v)
	if not cuid or cuid == 0 then
		return v
	end
	local mode, uid, gid = struct.unpack('<HI4I4', v, 3)
	local m = mode
	if uid ~= cuid then
		uid = cuid
		m = m - bit.band(m, S_ISUID + S_ISGID)
	end
	if not cgroups[gid] then
		gid = cgid
		m = m - bit.band(m, S_ISGID)
	end
	return string.sub(v, 1, 2) .. struct.pack('<HI4I4', m, uid, gid) ..
		string.sub(v, 13)
end
local function snap_keys(top)
	return 'snapdirs:' .. d(top), 'snapmap:' .. d(top),
		'snapquota:' .. d(top)
end
-- the entry of top in snapshots: sid (string), time, dropping
local function snap_state(top)
	local v = redis.call('HGET', 'snapshots', d(top))
	if not v then
		return nil
	end
	local sid, t, dr = string.match(v, '^(%d+):(%d+)(:?d?)$')
	if not sid then
		error('granary: corrupt snapshots entry')
	end
	return sid, tonumber(t), dr == ':d'
end
local function snap_set(top, sid, dropping)
	redis.call('HSET', 'snapshots', d(top),
		sid .. ':' .. d(now()) .. (dropping and ':d' or ''))
end
-- a step of the builder (dropping false) or the dropper (true) of top:
-- false when someone else has claimed it meanwhile. Each step renews
-- the time, which is what tells an abandoned snapshot from a slow one.
local function snap_own(top, sid, dropping)
	local osid, _, dr = snap_state(top)
	if osid ~= sid or dr ~= dropping then
		return false
	end
	snap_set(top, sid, dropping)
	return true
end
-- is ino anc, or below anc? (the parent fields up to the root) The
-- versions directory of anc is not: the walk of anc never enters it.
local function snap_within(anc, ino)
	local n = 0
	if redis.call('HGET', 'vdirs', d(anc)) == d(ino) then
		return false
	end
	while ino ~= anc do
		local a = iget(ino)
		if ino == 1 or not a then
			return false
		end
		ino = a.par
		n = n + 1
		if n > 100000 then
			error('granary: directory loop')
		end
	end
	return true
end

-- what this call made: inodes by kind, file bytes (lengths; stored:
-- what usedspace counts), references to add (slice id -> count);
-- flushed once at the end by made_flush, which also counts the inodes
-- and stored bytes of a detached copy (top) in snapquota:<top>: the
-- copy is outside every quota until snap_commit links it
local mfiles, mdirs, mothers, mbytes, refs = 0, 0, 0, 0, {}
local mstored = 0
local function refs_add(s)
	local o = 1
	while o <= #s do
		local n, _, id = rec_at(s, o)
		if id ~= 0 then
			refs[id] = (refs[id] or 0) + 1
		end
		o = o + n
	end
end
local function made_flush(top)
	local n = mfiles + mdirs + mothers
	if n > 0 then
		redis.call('INCRBY', 'totalinodes', n)
	end
	if mstored > 0 then
		redis.call('INCRBY', 'usedspace', d(mstored))
	end
	if top then
		local _, _, qk = snap_keys(top)
		if n > 0 then
			redis.call('HINCRBY', qk, 'i', n)
		end
		if mstored > 0 then
			redis.call('HINCRBY', qk, 's', d(mstored))
		end
	end
	-- one more reference per copied record: a packed slice too, whose
	-- dead bytes are counted only when its last reference goes
	for id, n in pairs(refs) do
		redis.call('HINCRBY', 'sliceref', d(id), n)
	end
	refs = {}
end
-- Copy inode src, whose whole record (irec) is v, to the new inode ino with
-- nlink links and parent par (directories; regular files: their parent
-- field, the directory of their first name): attributes (ctime now;
-- owners as owned() leaves them), chunk lists, symlink target, xattrs. A
-- directory's entries are the walk's business. Returns the copy's type.
local function clone(src, v, ino, nlink, par)
	local ty = string.byte(v, 2)
	if #v < ALEN or string.byte(v, 1) ~= 1 then
		error('granary: corrupt inode record')
	end
	v = owned(v)
	if ty == DIR then
		local a = attr_unpack(string.sub(v, 1, ALEN))
		a.nlink, a.par, a.cs, a.cn = nlink, par, now()
		redis.call('HSET', ib(ino), iaf(ino), attr_pack(a))
		mdirs = mdirs + 1
	else
		-- nlink and ctime spliced in: the bulk of a tree, cheaper
		-- than unpacking 14 fields; a short tail (chunk 0) goes in
		-- the same HSET
		local a = string.sub(v, 1, 12) .. struct.pack('<I4', nlink) ..
			string.sub(v, 17, 50) .. struct.pack('<i5I4', now())
		local t = string.sub(v, ALEN + 1)
		local f = {iaf(ino), a}
		if ty == FILE then
			f[3], f[4] = ipf(ino), d(par)
			fpars[ino] = par
		end
		if #t > 0 and #t <= TAILMAX then
			f[#f + 1], f[#f + 2] = itf(ino), t
		elseif #t > 0 then
			redis.call('SET', ckey(ino, 0), t)
		end
		redis.call('HSET', ib(ino), unpack(f))
	end
	if ty == FILE then
		local len, par = struct.unpack('<I8I8', v, 17)
		refs_add(string.sub(v, ALEN + 1))
		-- records exist only below the length (truncate drops the
		-- rest): one step per chunk of it, as truncate takes
		for idx = 1, math.ceil(len / CHUNK) - 1 do
			local c = redis.call('GET', ckey(src, idx))
			if c then
				refs_add(c)
				redis.call('SET', ckey(ino, idx), c)
			end
		end
		-- the copy's record carries the stored bytes too
		mfiles, mbytes = mfiles + 1, mbytes + len
		mstored = mstored + stored({len = len, par = par})
	elseif ty ~= DIR then
		if ty == SYMLINK then
			local t = redis.call('GET', key('s', src))
			if t then
				redis.call('SET', key('s', ino), t)
			end
		end
		mothers = mothers + 1
	end
	local x = redis.call('HGETALL', key('x', src))
	local user = cuid and cuid ~= 0
	for i = 1, #x, 2 do
		-- a user's cp -a cannot set these (file capabilities!)
		if not (user and (string.find(x[i], '^security%.') or
			string.find(x[i], '^trusted%.'))) then
			redis.call('HSET', key('x', ino), x[i], x[i + 1])
		end
	end
	return ty
end
local function made()
	return mfiles, mdirs, mothers, mbytes
end
-- the stored bytes and inodes that the detached copy top holds
local function snap_quota_made(top)
	local _, _, qk = snap_keys(top)
	local r = redis.call('HMGET', qk, 's', 'i')
	return tonumber(r[1] or 0), tonumber(r[2] or 0)
end
