-- lib: trash
-- ARGV: parent, name, newparent, newname, flags (0, 1 = RENAME_NOREPLACE,
-- 2 = RENAME_EXCHANGE). Every check comes before the first write: a Lua
-- error does not roll back what a script already did. Returns {0, the
-- inode the rename replaced and moved into the trash (0: none), the
-- attributes of parent and of newparent as the rename left them, 1 when
-- a directory moved or was replaced, or a name left the trash, whose
-- directories other removals change (else 0)}; {0} alone when nothing
-- changed (two names of one inode). Names leave the trash by rename (a
-- restore by hand), never enter it.
-- Between two quota chains only what has a usage known without a walk
-- moves (meta/meta_quota.h): a non-directory with one name, an empty
-- directory, a directory with a quota of its own; the rest is EXDEV,
-- which mv(1) turns into a copy. EDQUOT when it does not fit.
local P, N, NP, NN = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local flags = tonumber(ARGV[5])
local exchange = flags == 2
local pa, npa, err
pa, err = getdir(P)
if not pa then
	return {err}
end
npa, err = getdir(NP)
if not npa then
	return {err}
end
local se = redis.call('HGET', key('d', P), N)
if not se then
	return {ENOENT}
end
local sino, sty = dent_unpack(se)
local sdepth = trash_depth(P, pa)
if sino == trash_ino() or sdepth == 1 or (exchange and sdepth ~= 0) then
	return {EPERM}
end
err = name_guard(NP, npa, NN)
if err ~= 0 then
	return {err}
end
local de = redis.call('HGET', key('d', NP), NN)
local dino, dty
if de then
	dino, dty = dent_unpack(de)
end
if exchange and not de then
	return {ENOENT}
end
if de and flags == 1 then
	return {EEXIST}
end
-- two names of one inode (or the same name twice): POSIX says do nothing
if de and dino == sino then
	return {0}
end
-- is ino anc, or below anc? (walks the parent fields up to the root)
local function within(anc, ino)
	local n = 0
	while ino ~= anc do
		if ino == 1 then
			return false
		end
		local a = iget(ino)
		if not a then
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
if sty == DIR and P ~= NP and within(sino, NP) then
	return {EINVAL}
end
if exchange and dty == DIR and P ~= NP and within(dino, P) then
	return {EINVAL}
end
local sa = iget(sino)
if not sa then
	error('granary: directory entry without inode')
end
local da
if de then
	da = iget(dino)
	if not da then
		error('granary: directory entry without inode')
	end
end
if not exchange and de then
	if sty == DIR and dty ~= DIR then
		return {ENOTDIR}
	end
	if sty ~= DIR and dty == DIR then
		return {EISDIR}
	end
	if dty == DIR and redis.call('HLEN', key('d', dino)) > 0 then
		return {ENOTEMPTY}
	end
end
-- the most quotas on a path from directory top (included) down to a
-- quota below it: what a move of top stacks on the quotas above it
local function quota_nest(top)
	local most = 0
	for _, q in ipairs(redis.call('HKEYS', 'quota')) do
		local ino, n, steps = tonumber(q), 0, 0
		while true do
			if redis.call('HEXISTS', 'quota', d(ino)) == 1 then
				n = n + 1
			end
			if ino == top then
				most = math.max(most, n)
				break
			end
			local a = iget(ino)
			if ino == 1 or not a or a.par == 0 then
				break
			end
			ino = a.par
			steps = steps + 1
			if steps > 100000 then
				error('granary: directory loop')
			end
		end
	end
	return most
end
-- quotas: cs the chain the name leaves, cd the one it enters; ms, mi
-- the bytes and inodes that move between them; rs, ri what the replaced
-- name frees in cd (removed as unlink and rmdir remove)
local cs, cd = quota_chain(P), quota_chain(NP)
local cross = not quota_same(cs, cd)
local ms, mi, rs, ri = 0, 0, 0, 0
if de and not exchange then
	if dty == DIR then
		ri = 1
	elseif da.nlink == 1 then
		rs, ri = qbytes(da), 1
	end
end
if cross then
	if exchange or (sty ~= DIR and sa.nlink > 1) then
		return {EXDEV}
	end
	if sty ~= DIR then
		ms, mi = qbytes(sa), 1
	elseif redis.call('HEXISTS', 'quota', d(sino)) == 1 then
		-- its usage is known: it moves whole, with the directory
		local u = redis.call('HMGET', 'quotaused', 's' .. d(sino),
			'i' .. d(sino))
		ms = math.max(tonumber(u[1] or 0), 0)
		mi = math.max(tonumber(u[2] or 0), 0) + 1
		if #cd + quota_nest(sino) > QNEST then
			return {EMLINK}
		end
	elseif redis.call('EXISTS', key('d', sino)) == 1 then
		return {EXDEV}
	else
		mi = 1
	end
	if quota_room(quota_minus(cd, cs), ms - rs, mi - ri) ~= 0 then
		return {EDQUOT}
	end
end
-- all checked: apply
local trashed = 0
if exchange then
	redis.call('HSET', key('d', P), N, de)
	redis.call('HSET', key('d', NP), NN, se)
	if P ~= NP then
		if sty == DIR then
			sa.par = NP
			pa.nlink, npa.nlink = pa.nlink - 1, npa.nlink + 1
		end
		if dty == DIR then
			da.par = P
			npa.nlink, pa.nlink = npa.nlink - 1, pa.nlink + 1
		end
	end
	if sty == FILE then
		fpar_set(sino, NP)
	end
	if dty == FILE then
		fpar_set(dino, P)
	end
	touch(dino, false)
else
	if sdepth == 2 then
		trash_take(P, N, sa)
	end
	-- the name replaced is removed as unlink and rmdir remove
	if de then
		quota_add(cd, -rs, -ri)
		if dty == DIR then
			quota_drop(dino)
			npa.nlink = npa.nlink - 1
			if not trash_put(NP, NN, dino, da) then
				inode_destroy(dino)
			end
		elseif da.nlink == 1 and trash_put(NP, NN, dino, da) then
			trashed = dino
		else
			link_drop(dino, da, NP)
		end
	end
	redis.call('HDEL', key('d', P), N)
	redis.call('HSET', key('d', NP), NN, se)
	if sty == DIR and P ~= NP then
		sa.par = NP
		pa.nlink, npa.nlink = pa.nlink - 1, npa.nlink + 1
	end
	-- a file's bytes count where its name went (for a file with
	-- several names, all in one chain, NP holds one of them)
	if sty == FILE then
		fpar_set(sino, NP)
	end
	if cross then
		quota_move(cs, cd, ms, mi)
		-- the clients' cached chains of the directory (and of
		-- those below it) are stale now
		if sty == DIR then
			redis.call('INCR', 'quotagen')
		end
	end
end
touch(sino, false)
touch(P, true)
touch(NP, true)
iflush()
return {0, trashed, attr_pack(pa), attr_pack(npa),
	(sty == DIR or dty == DIR or sdepth ~= 0) and 1 or 0}
