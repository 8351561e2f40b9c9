-- prelude: shared by every script. Records are packed with the struct
-- library; Lua numbers are doubles, so inode numbers, slice ids and
-- lengths must stay below 2^53 (documented in SCHEMA.md). A macro name
-- between @ signs is its C value, and --C: names the C constants the
-- build checks a line against (tools/lua-embed.sh).
local CHUNK = 67108864 --C: META_CHUNK_SIZE
local FILE, DIR, SYMLINK, BLK, CHR = 1, 2, 3, 5, 6 --C: META_FILE, META_DIR, META_SYMLINK, META_BLK, META_CHR
local EPERM, ENOENT, EBUSY, EEXIST, ENODEV = @EPERM@, @ENOENT@, @EBUSY@, @EEXIST@, @ENODEV@
local ENOTDIR, EISDIR, EINVAL, ENOTEMPTY, ENODATA = @ENOTDIR@, @EISDIR@, @EINVAL@, @ENOTEMPTY@, @ENODATA@
local S_ISUID, S_ISGID, S_IXGRP = 2048, 1024, 8 --C: S_ISUID, S_ISGID, S_IXGRP
local VERSIONS, TRASH = @META_VERSIONS@, @META_TRASH@
local NAMEMAX = 255 --C: META_NAME_MAX
local AFMT, ALEN = '<BBHI4I4I4I8I8i5I4i5I4i5I4', 59 --C: _, ATTR_LEN
-- slice records: full (form 1), or short (2) for a whole slice; 3 and 4
-- are 2 and 1 followed by the frame's place in a pack: pack, poff, plen
local RFMT, RLEN = '<BI4I8I4I4I4', 25 --C: _, REC_LEN
local SFMT, SLEN = '<BI4I8I4', 17 --C: _, REC_SHORT_LEN
local PFMT, PLEN = '<I8I4I4', 16 --C: _, REC_PACK_EXTRA

local function d(n)
	return string.format('%d', n)
end
local function key(p, n)
	return p .. string.format('%d', n)
end
local function ckey(ino, idx)
	return string.format('c%d_%d', ino, idx)
end

-- server time, read once per script so that every field touched by one
-- operation carries the same timestamp
local tsec, tns
local function now()
	if not tsec then
		local t = redis.call('TIME')
		tsec, tns = tonumber(t[1]), tonumber(t[2]) * 1000
	end
	return tsec, tns
end

local function attr_unpack(s)
	if #s ~= ALEN or string.byte(s, 1) ~= 1 then
		error('granary: corrupt inode record')
	end
	local _, ty, mode, uid, gid, nlink, len, par, as, an, ms, mn, cs, cn =
		struct.unpack(AFMT, s)
	return {ty = ty, mode = mode, uid = uid, gid = gid, nlink = nlink,
		len = len, par = par, as = as, an = an, ms = ms, mn = mn,
		cs = cs, cn = cn}
end

local function attr_pack(a)
	return struct.pack(AFMT, 1, a.ty, a.mode, a.uid, a.gid, a.nlink, a.len,
		a.par, a.as, a.an, a.ms, a.mn, a.cs, a.cn)
end
-- A regular file's par field holds its stored bytes + 1: an upper bound
-- of the bytes of data it holds (written, fallocated, minus punched;
-- never above the length). 0: not known (a file from before the field),
-- counted as its length. usedspace is the sum of these (SCHEMA.md).
local function stored(a)
	if a.par == 0 then
		return a.len
	end
	return math.min(a.par - 1, a.len)
end
-- what a data script's change counts in (quota_data, below)
local qdata, qhour, quota_add, data_charge = {}, nil, nil, nil
-- the file's stored bytes become n (clamped to [0, length]); usedspace
-- and data_charge follow. The caller writes the record (idirty).
local function stored_set(a, n)
	local o = stored(a)
	n = math.max(0, math.min(n, a.len))
	a.par = n + 1
	if n ~= o then
		redis.call('INCRBY', 'usedspace', d(n - o))
		data_charge(n - o)
	end
end

-- Inodes live IB to a hash, n<ino div IB> (SCHEMA.md): field ino % IB
-- holds the attributes, field IB + ino % IB chunk 0's slice records (the
-- tail) while they fit in TAILMAX bytes; a longer tail is in c<ino>_0.
-- Both sizes keep the hash in Redis's compact encoding (listpack: at most
-- 128 fields of at most 64 bytes by default), where a field costs its
-- bytes plus about 3.
local IB, TAILMAX = 32, 64 --C: INO_PER_HASH, _
local function ib(ino)
	return string.format('n%d', math.floor(ino / IB))
end
local function iaf(ino)
	return d(ino % IB)
end
local function itf(ino)
	return d(ino % IB + IB)
end
-- a regular file's parent field (SCHEMA.md "Inode record"): its
-- directory, -hour in the trash, 0 not known; cached in fpars
local fpars = {}
local function ipf(ino)
	return d(ino % IB + 2 * IB)
end
local function fpar(ino)
	local p = fpars[ino]
	if p == nil then
		p = tonumber(redis.call('HGET', ib(ino), ipf(ino)) or '0')
		fpars[ino] = p
	end
	return p
end
local function fpar_set(ino, dir)
	if fpars[ino] ~= dir then
		if dir == 0 then
			redis.call('HDEL', ib(ino), ipf(ino))
		else
			redis.call('HSET', ib(ino), ipf(ino), d(dir))
		end
		fpars[ino] = dir
	end
end

-- inode cache: a script reads each inode once and writes it once (iflush),
-- so that two names for one inode (rename within a directory) never see
-- stale copies of each other
local icache, idirty = {}, {}
local function iget(ino)
	local a = icache[ino]
	if a == nil then
		local s = redis.call('HGET', ib(ino), iaf(ino))
		a = s and attr_unpack(s) or false
		icache[ino] = a
	end
	return a
end
-- iget with the parent field in the same read
local function iget_data(ino)
	local a = icache[ino]
	if a == nil then
		local r = redis.call('HMGET', ib(ino), iaf(ino), ipf(ino))
		a = r[1] and attr_unpack(r[1]) or false
		icache[ino] = a
		fpars[ino] = tonumber(r[2] or '0')
	end
	return a
end
local function iflush()
	for ino in pairs(idirty) do
		local a = icache[ino]
		if a then
			redis.call('HSET', ib(ino), iaf(ino), attr_pack(a))
		end
	end
	idirty = {}
end
-- chunk 0's slice records ('' when none, or no such inode): in one of
-- the two places, never both
local function tail_get(ino)
	return (redis.call('HGET', ib(ino), itf(ino)) or '') ..
		(redis.call('GET', ckey(ino, 0)) or '')
end
-- chunk 0 becomes t (the inode's attributes exist; fresh: it has no
-- chunk 0 yet, nothing to delete)
local function tail_set(ino, t, fresh)
	if #t > TAILMAX then
		redis.call('SET', ckey(ino, 0), t)
		if not fresh then
			redis.call('HDEL', ib(ino), itf(ino))
		end
		return
	end
	if #t > 0 then
		redis.call('HSET', ib(ino), itf(ino), t)
	elseif not fresh then
		redis.call('HDEL', ib(ino), itf(ino))
	end
	if not fresh then
		redis.call('DEL', ckey(ino, 0))
	end
end
-- records t appended to chunk 0; a tail outgrowing TAILMAX moves to
-- c<ino>_0 for good (APPEND there reserves room for growth, which a
-- file written in many pieces wants)
local function tail_append(ino, t)
	local b, f, k0 = ib(ino), itf(ino), ckey(ino, 0)
	local s = redis.call('HGET', b, f)
	-- a tail in the field means none in c<ino>_0 (never both)
	if s or redis.call('EXISTS', k0) == 0 then
		s = (s or '') .. t
		if #s <= TAILMAX then
			redis.call('HSET', b, f, s)
			return
		end
		redis.call('HDEL', b, f)
		t = s
	end
	redis.call('APPEND', k0, t)
end
-- the whole record of an inode, attributes then chunk 0, or nil
local function irec(ino)
	local r = redis.call('HMGET', ib(ino), iaf(ino), itf(ino))
	local s, t = r[1], r[2]
	if not s then
		return nil
	end
	if t then
		return s .. t
	end
	if string.byte(s, 2) == FILE and struct.unpack('<I8', s, 17) > 0 then
		return s .. (redis.call('GET', ckey(ino, 0)) or '')
	end
	return s
end
local function getdir(ino)
	local a = iget(ino)
	if not a then
		return nil, ENOENT
	end
	if a.ty ~= DIR then
		return nil, ENOTDIR
	end
	return a
end
-- The trash (SCHEMA.md, "Trash"): a directory at the root whose inode is
-- the key 'trash', holding hour directories, each holding what was
-- removed in that hour. The inode of the trash, false when there is none
-- (read once a call).
local tino
local function trash_ino()
	if tino == nil then
		tino = tonumber(redis.call('GET', 'trash') or '0')
	end
	return tino ~= 0 and tino
end
-- Where directory ino (record a) is: 0 outside the trash, 1 the trash,
-- 2 an hour directory, 3 a directory removed into an hour directory.
-- Nothing deeper exists: nothing can be made inside (name_guard), and a
-- directory is removed empty.
local function trash_depth(ino, a)
	local t = trash_ino()
	if not t then
		return 0
	end
	if ino == t then
		return 1
	elseif a.par == t then
		return 2
	end
	local pa = iget(a.par)
	return pa and pa.par == t and 3 or 0
end
-- May the name be made (created, linked, renamed to) in directory parent
-- (record p)? 0, EINVAL for the trash's name at the root (reserved, as
-- VERSIONS is everywhere), EPERM inside the trash.
local function name_guard(parent, p, name)
	if parent == 1 and name == TRASH then
		return EINVAL
	end
	return trash_depth(parent, p) ~= 0 and EPERM or 0
end

-- Quotas (SCHEMA.md "Quotas", meta/meta_quota.h). 'quota' maps a
-- directory to its limits (QFMT: bytes, inodes; 0 = none); 'quotaused'
-- holds each one's usage, s<ino> stored bytes, i<ino> inodes below it,
-- p<ino> the sum of the sessions' pending bytes (qp<ino>: sid -> bytes).
local EDQUOT, EXDEV, EMLINK = @EDQUOT@, @EXDEV@, @EMLINK@
local QNEST = 8 --C: META_QUOTA_NEST
local QFMT = '<I8I8'
local qany, qrec, qchains, qdetached = nil, {}, {}, {}
-- Does the volume have any quota? (read once a call)
local function quota_any()
	if qany == nil then
		qany = redis.call('EXISTS', 'quota') == 1
	end
	return qany
end
-- The chain of directory dir: the directories with a quota among dir and
-- its ancestors, nearest first. {} when the volume has none, and for a
-- directory in the trash, in a version (DIR/.versions/...) or in a
-- detached tree (a snapshot being built, a tree a restore replaced:
-- qdetached[dir] is its top): those are outside every quota.
local function quota_chain(dir)
	if not quota_any() then
		return {}
	end
	local c = qchains[dir]
	if c then
		return c
	end
	local path, ino, n = {}, dir, 0
	local t = trash_ino()
	while true do
		if ino == t then
			qchains[dir] = {}
			return qchains[dir]
		end
		path[#path + 1] = d(ino)
		if ino == 1 then
			break
		end
		local a = iget(ino)
		if not a or a.ty ~= DIR or a.par == 0 then
			qchains[dir] = {}
			if a and a.par == 0 then
				qdetached[dir] = ino
			end
			return qchains[dir]
		end
		ino = a.par
		n = n + 1
		if n > 100000 then
			error('granary: directory loop')
		end
	end
	-- a versions directory V of D has parent D and is vdirs[D]
	if #path > 1 then
		local up = {}
		for i = 2, #path do
			up[#up + 1] = path[i]
		end
		local v = redis.call('HMGET', 'vdirs', unpack(up))
		for i = 1, #up do
			if v[i] and v[i] == path[i] then
				qchains[dir] = {}
				return qchains[dir]
			end
		end
	end
	local r = redis.call('HMGET', 'quota', unpack(path))
	c = {}
	for i = 1, #path do
		if r[i] then
			local q = tonumber(path[i])
			c[#c + 1] = q
			qrec[q] = r[i]
		end
	end
	qchains[dir] = c
	return c
end
-- the members of chain a that are not in chain b
local function quota_minus(a, b)
	local out = {}
	for _, q in ipairs(a) do
		local found = false
		for _, r in ipairs(b) do
			if r == q then
				found = true
				break
			end
		end
		if not found then
			out[#out + 1] = q
		end
	end
	return out
end
local function quota_same(a, b)
	return #a == #b and #quota_minus(a, b) == 0
end
-- 0, or EDQUOT when adding ds bytes and di inodes to each quota of chain
-- c would pass its limit. A creation (di > 0, ds 0) is refused when the
-- bytes are used up. Pending bytes do not count here: they are the
-- clients' to check (fs/vfs/quota.c).
local function quota_room(c, ds, di)
	for _, q in ipairs(c) do
		local ms, mi = struct.unpack(QFMT, qrec[q])
		if ms > 0 or mi > 0 then
			local u = redis.call('HMGET', 'quotaused', 's' .. d(q),
				'i' .. d(q))
			local us, ui = tonumber(u[1] or 0), tonumber(u[2] or 0)
			if mi > 0 and di > 0 and ui + di > mi then
				return EDQUOT
			end
			if ms > 0 and ((ds > 0 and us + ds > ms) or
				(ds == 0 and di > 0 and us >= ms)) then
				return EDQUOT
			end
		end
	end
	return 0
end
-- add ds bytes and di inodes to each quota of chain c
function quota_add(c, ds, di)
	for _, q in ipairs(c) do
		if ds ~= 0 then
			redis.call('HINCRBY', 'quotaused', 's' .. d(q), d(ds))
		end
		if di ~= 0 then
			redis.call('HINCRBY', 'quotaused', 'i' .. d(q), d(di))
		end
	end
end
-- usage moves from chain a to chain b (a rename): what they share keeps it
local function quota_move(a, b, ds, di)
	quota_add(quota_minus(a, b), -ds, -di)
	quota_add(quota_minus(b, a), ds, di)
end
-- directory ino is gone: so is its quota, if it had one
local function quota_drop(ino)
	if quota_any() and redis.call('HDEL', 'quota', d(ino)) == 1 then
		redis.call('HDEL', 'quotaused', 's' .. d(ino), 'i' .. d(ino),
			'p' .. d(ino))
		redis.call('DEL', key('qp', ino))
		redis.call('INCR', 'quotagen')
	end
end
-- a session is gone: its pending bytes stop counting in every quota
local function quota_session_drop(sid)
	for _, q in ipairs(redis.call('HKEYS', 'quota')) do
		local p = redis.call('HGET', 'qp' .. q, sid)
		if p then
			redis.call('HDEL', 'qp' .. q, sid)
			redis.call('HINCRBY', 'quotaused', 'p' .. q, '-' .. p)
		end
	end
end
-- the quotas of s ("Q1,Q2,...") that exist
local function quota_parse(s)
	local c, out = {}, {}
	for q in string.gmatch(s or '', '%d+') do
		c[#c + 1] = q
	end
	local r = #c > 0 and redis.call('HMGET', 'quota', unpack(c)) or {}
	for i = 1, #c do
		if r[i] then
			out[#out + 1] = tonumber(c[i])
		end
	end
	return out
end
-- What a data script's change to file ino (record a, from iget_data)
-- counts in, SCHEMA.md "Quotas": qdata, the chain of its parent field,
-- or qhour, its hour in the trash. s: the client's chain "GEN:DIR:Q,..",
-- taken as it is while the field is DIR and quotagen is GEN, else the
-- walk; only Q,.. for a file without the field.
local function quota_data(ino, a, s)
	qdata, qhour = {}, nil
	local p = fpar(ino)
	if a.nlink == 0 or p < 0 then
		qhour = a.nlink > 0 and -p or nil
		return
	end
	local gen, dir, list = string.match(s or '', '^(%d+):(%d+):([%d,]*)$')
	if p ~= 0 and tonumber(dir or '0') == p and
		tonumber(redis.call('GET', 'quotagen') or '0') == tonumber(gen) then
		for q in string.gmatch(list, '%d+') do
			qdata[#qdata + 1] = tonumber(q)
		end
	elseif quota_any() then
		local pa = p ~= 0 and iget(p)
		if not pa or pa.ty ~= DIR then
			qdata = quota_parse(list)
			return
		end
		qdata = quota_chain(p)
		if qdetached[p] then
			qdata = quota_parse(redis.call('HGET',
				'snapquota:' .. d(qdetached[p]), 'c'))
		end
	end
end
function data_charge(ds)
	quota_add(qdata, ds, 0)
	if qhour and ds ~= 0 and
		redis.call('HINCRBY', 'trashbytes', d(qhour), d(ds)) <= 0 then
		redis.call('HDEL', 'trashbytes', d(qhour))
	end
end
-- A name of file ino in dir went, others are left: a field naming dir
-- names the nearest quota above it (all names share its chain), or 0
-- for a trash entry (root linked its file out)
local function fpar_leave(ino, dir)
	local p = fpar(ino)
	if p == -dir then
		fpar_set(ino, 0)
	elseif p == dir then
		local c = quota_chain(dir)
		if #c > 0 then
			fpar_set(ino, c[1])
		end
	end
end

-- ctime, and mtime too when m
local function touch(ino, m)
	local a = iget(ino)
	local s, ns = now()
	a.cs, a.cn = s, ns
	if m then
		a.ms, a.mn = s, ns
	end
	idirty[ino] = true
end

-- directory entry value: type, then the inode number little endian
-- without its high zero bytes (2-9 bytes: 6 up to inode 2^40, small
-- enough for the allocator's 8-byte class)
local function dent_pack(ino, ty)
	local s, n = struct.pack('<BI8', ty, ino), 9
	while n > 2 and string.byte(s, n) == 0 do
		n = n - 1
	end
	return string.sub(s, 1, n)
end
local function dent_unpack(s)
	if #s < 2 or #s > 9 then
		error('granary: corrupt directory entry')
	end
	local ino = 0
	for i = #s, 2, -1 do
		ino = ino * 256 + string.byte(s, i)
	end
	return ino, string.byte(s, 1)
end

-- the slice record at offset o of s: its length, pos, id, size, off,
-- len, and for a slice in a pack: pack, plen (else nil)
local function rec_at(s, o)
	local v = string.byte(s, o)
	local left, _, n, pos, id, size, off, len = #s - o + 1
	if (v == 1 or v == 4) and left >= RLEN then
		_, pos, id, size, off, len = struct.unpack(RFMT, s, o)
		n = RLEN
	elseif (v == 2 or v == 3) and left >= SLEN then
		_, pos, id, size = struct.unpack(SFMT, s, o)
		n, off, len = SLEN, 0, size
	else
		error('granary: corrupt slice record')
	end
	if v < 3 then
		return n, pos, id, size, off, len
	end
	if left < n + PLEN then
		error('granary: corrupt slice record')
	end
	local pack, _, plen = struct.unpack(PFMT, s, o + n)
	return n + PLEN, pos, id, size, off, len, pack, plen
end

-- a chunk record referencing a slice is gone; the last reference queues
-- the slice for deletion (sliceref holds references beyond the first)
local function slice_unref(rec, id)
	if id == 0 then
		return
	end
	local r = redis.call('HINCRBY', 'sliceref', d(id), -1)
	if r <= 0 then
		redis.call('HDEL', 'sliceref', d(id))
	end
	if r < 0 then
		redis.call('RPUSH', 'delslices', rec)
	end
end
local function recs_unref(s)
	local o = 1
	while o <= #s do
		local n, _, id = rec_at(s, o)
		slice_unref(string.sub(s, o, o + n - 1), id)
		o = o + n
	end
end
-- drop c<ino>_<idx> (chunk 0 of a live inode is its tail: see truncate)
local function chunk_drop(ino, idx)
	local k = ckey(ino, idx)
	local s = redis.call('GET', k)
	if not s then
		return
	end
	recs_unref(s)
	redis.call('DEL', k)
end
-- drop chunk idx of a live file as truncate does (chunk 0: its tail)
local function chunk_cut(ino, idx)
	if idx == 0 then
		recs_unref(tail_get(ino))
		tail_set(ino, '')
	else
		chunk_drop(ino, idx)
	end
end

-- bytes of data (records with a slice id) that chunk list s shows in
-- [lo, hi): newer records cover older ones. A list of more than
-- DATAMAX records is not resolved (the cost grows with its square):
-- nil, and the caller assumes the worst.
local DATAMAX = 2000
local function data_in(s, lo, hi)
	local recs, o = {}, 1
	while o <= #s do
		local n, pos, id, _, _, len = rec_at(s, o)
		recs[#recs + 1] = {pos, pos + len, id}
		o = o + n
		if #recs > DATAMAX then
			return nil
		end
	end
	-- newest first, each record takes what is still uncovered
	local gaps, sum = {{lo, hi}}, 0
	for i = #recs, 1, -1 do
		if #gaps == 0 then
			break
		end
		local r, ng = recs[i], {}
		for _, g in ipairs(gaps) do
			local a, b = math.max(g[1], r[1]), math.min(g[2], r[2])
			if a < b then
				if r[3] ~= 0 then
					sum = sum + b - a
				end
				if g[1] < a then
					ng[#ng + 1] = {g[1], a}
				end
				if b < g[2] then
					ng[#ng + 1] = {b, g[2]}
				end
			else
				ng[#ng + 1] = g
			end
		end
		gaps = ng
	end
	return sum
end

-- A directory that had versions hands its versions directory over to
-- the snapshot cleaner: listed in snapshots as left by nobody (sid 0),
-- its drop walk starting at the top with source 0 (see snap_drop)
local function vdir_drop(ino)
	local v = redis.call('HGET', 'vdirs', d(ino))
	if not v then
		return
	end
	redis.call('HDEL', 'vdirs', d(ino))
	redis.call('DEL', key('v', ino))
	if redis.call('EXISTS', 'd' .. v) == 0 then
		-- no version left: the empty directory goes at once
		local vi = tonumber(v)
		redis.call('HDEL', ib(vi), iaf(vi))
		redis.call('DEL', 'x' .. v)
		redis.call('DECR', 'totalinodes')
		icache[vi], idirty[vi] = false, nil
		return
	end
	redis.call('DEL', 'snapdirs:' .. v, 'snapmap:' .. v)
	redis.call('RPUSH', 'snapdirs:' .. v, struct.pack('<I8I8', 0,
		tonumber(v)))
	redis.call('HSET', 'snapshots', v, '0:' .. d(now()))
end

-- what inode a (a name's last link) counts in a quota besides itself:
-- the stored bytes of a regular file
local function qbytes(a)
	return a.ty == FILE and stored(a) or 0
end

-- no name and no opener left: delete the inode, queue its data
local function inode_destroy(ino)
	local a = iget(ino)
	if a.ty == DIR then
		vdir_drop(ino)
		quota_drop(ino)
	end
	if a.ty == FILE then
		-- chunk 0 moves out of the inode's hash (deleted below) to
		-- its own key, where reclamation finds it like any chunk.
		-- Records exist only below the length: len 0 has none.
		local t = redis.call('HGET', ib(ino), itf(ino))
		if t then
			redis.call('SET', ckey(ino, 0), t)
		end
		if a.len > 0 then
			redis.call('ZADD', 'delfiles', now(),
				d(ino) .. ':' .. d(a.len))
		end
		if stored(a) > 0 then
			redis.call('DECRBY', 'usedspace', d(stored(a)))
		end
	end
	redis.call('DECR', 'totalinodes')
	redis.call('HDEL', ib(ino), iaf(ino), itf(ino), ipf(ino))
	redis.call('DEL', key('x', ino), key('s', ino), key('d', ino))
	icache[ino] = false
	idirty[ino] = nil
	fpars[ino] = 0
end
-- true when the inode was deleted
local function inode_release(ino)
	local a = iget(ino)
	if a and a.nlink == 0 and redis.call('EXISTS', key('o', ino)) == 0 then
		inode_destroy(ino)
		return true
	end
	return false
end
-- a name of non-directory ino (record a) in dir is gone: one link less,
-- and the inode deleted once it has none and nobody has it open
local function link_drop(ino, a, dir)
	if a.ty == FILE and a.nlink > 1 then
		fpar_leave(ino, dir)
	end
	if a.nlink > 0 then
		a.nlink = a.nlink - 1
	end
	touch(ino, false)
	inode_release(ino)
end
-- Objects staged on a client's disk and not yet in the store (writeback)
-- are named in staging ('b<id>_<idx>' a block, 'p<pack>' a pack); the
-- record that would have their objects deleted waits in stagedead until
-- the client has put them (staging_done), else the put would come after
-- the delete and leave the object behind.
local nstaging
-- does slice id (size bytes, blocks of its own) have a block staged?
local function staged_blocks(id, size)
	nstaging = nstaging or redis.call('HLEN', 'staging')
	if nstaging == 0 then
		return false
	end
	local bs = tonumber(redis.call('HGET', 'setting', 'block_size'))
	for idx = 0, math.max(math.ceil(size / bs), 1) - 1 do
		if redis.call('HEXISTS', 'staging',
			string.format('b%d_%d', id, idx)) == 1 then
			return true
		end
	end
	return false
end
-- staged object name ('b<id>_<idx>' or 'p<pack>') is in the store now, or
-- never will be: the name goes, and a dead record parked for it goes back
-- to delslices once nothing of its slice or pack is staged
local function staging_release(name)
	redis.call('HDEL', 'staging', name)
	local k = string.match(name, '^b(%d+)_%d+$') or name
	local rec = redis.call('HGET', 'stagedead', k)
	local ready = rec and true
	if rec and k ~= name then
		local _, _, id, size = rec_at(rec, 1)
		ready = not staged_blocks(id, size)
	end
	if ready then
		redis.call('RPUSH', 'delslices', rec)
		redis.call('HDEL', 'stagedead', k)
	end
end
-- plen more dead bytes in pack; a pack whose dead bytes reach its
-- recorded total is forgotten and handed out (appended to out) for its
-- object to be deleted, or parked in stagedead while it is staged.
-- A pack with no total yet keeps counting. True when all dead.
local function pack_dead(pack, plen, out)
	local dead = redis.call('HINCRBY', 'packdead', d(pack), plen)
	local total = tonumber(redis.call('HGET', 'packs', d(pack)))
	if total and dead >= total then
		redis.call('HDEL', 'packs', d(pack))
		redis.call('HDEL', 'packdead', d(pack))
		redis.call('ZREM', 'packretired', d(pack)) -- a rewrite that failed
		local rec = struct.pack('<BI8I8', 5, pack, total)
		if redis.call('HEXISTS', 'staging', 'p' .. d(pack)) == 1 then
			redis.call('HSET', 'stagedead', 'p' .. d(pack), rec)
		else
			out[#out + 1] = rec
		end
		return true
	elseif dead == 0 then
		redis.call('HDEL', 'packdead', d(pack))
	end
	return false
end

-- the per-call state back to its start: a script (EVALSHA) runs the
-- prelude anew each time, a function (FCALL) keeps its locals from one
-- call to the next and so calls this first
local function fresh()
	tsec, tns, icache, idirty, nstaging = nil, nil, {}, {}, nil
	tino, fpars = nil, {}
	qany, qrec, qchains, qdetached, qdata, qhour = nil, {}, {}, {}, {}, nil
end
