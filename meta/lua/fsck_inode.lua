-- ARGV: ino, rec (its attribute record as fsck read it), nlink ('':
-- as it is), parent ('': as it is; directories), lf ('1': link it as
-- '#<ino>' in the root's lost+found, made when missing: a directory
-- 0700 owned by root). Refuses (EAGAIN) when the record changed since
-- fsck read it and (EBUSY) while a session has the inode open: a live
-- client's change is never undone. Returns {0}.
local EAGAIN = @EAGAIN@
local ino, rec = tonumber(ARGV[1]), ARGV[2]
if redis.call('HGET', ib(ino), iaf(ino)) ~= rec then
	return {EAGAIN}
end
if redis.call('EXISTS', key('o', ino)) == 1 then
	return {EBUSY}
end
local a = iget(ino)
if ARGV[5] == '1' then
	local LF = 'lost+found'
	local lf
	local e = redis.call('HGET', 'd1', LF)
	if e then
		local ty
		lf, ty = dent_unpack(e)
		local l = iget(lf)
		if ty ~= DIR or not l or l.ty ~= DIR then
			return {ENOTDIR}
		end
	else
		lf = redis.call('INCRBY', 'nextinode', 1)
		local s, ns = now()
		icache[lf] = {ty = DIR, mode = 448, uid = 0, gid = 0, nlink = 2,
			len = 0, par = 1, as = s, an = ns, ms = s, mn = ns,
			cs = s, cn = ns}
		idirty[lf] = true
		redis.call('HSET', 'd1', LF, dent_pack(lf, DIR))
		redis.call('INCR', 'totalinodes')
		local r = iget(1)
		r.nlink = r.nlink + 1
		touch(1, true)
	end
	local name = '#' .. d(ino)
	if redis.call('HEXISTS', key('d', lf), name) == 1 then
		return {EEXIST}
	end
	redis.call('HSET', key('d', lf), name, dent_pack(ino, a.ty))
	if a.ty == DIR then
		a.par = lf
		local l = iget(lf)
		l.nlink = l.nlink + 1
	elseif a.ty == FILE then
		fpar_set(ino, lf)
	end
	touch(lf, true)
end
if ARGV[3] ~= '' then
	a.nlink = tonumber(ARGV[3])
end
if ARGV[4] ~= '' and a.ty == DIR then
	a.par = tonumber(ARGV[4])
end
touch(ino, false)
iflush()
return {0}
