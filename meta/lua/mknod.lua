-- ARGV: parent, name, ino, type, mode, uid, gid, rdev, symlink target,
-- sid to register an open of the new inode for ('0': none).
-- Returns {0, the new inode's attributes, the parent's}; EDQUOT when a
-- quota above the parent has no inode left, or no byte.
local parent, name, ino = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ty, mode = tonumber(ARGV[4]), tonumber(ARGV[5])
local uid, gid, rdev = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local p, err = getdir(parent)
if not p then
	return {err}
end
err = name_guard(parent, p, name)
if err ~= 0 then
	return {err}
end
if redis.call('HEXISTS', key('d', parent), name) == 1 then
	return {EEXIST}
end
if redis.call('HEXISTS', ib(ino), iaf(ino)) == 1 then
	error('granary: new inode number already in use')
end
local qc = quota_chain(parent)
if quota_room(qc, 0, 1) ~= 0 then
	return {EDQUOT}
end
-- BSD group semantics under a setgid directory, as ext4 does
if bit.band(p.mode, S_ISGID) ~= 0 then
	gid = p.gid
	if ty == DIR then
		mode = bit.bor(mode, S_ISGID)
	end
end
local s, ns = now()
local a = {ty = ty, mode = mode, uid = uid, gid = gid, nlink = 1, len = 0,
	par = 0, as = s, an = ns, ms = s, mn = ns, cs = s, cn = ns}
if ty == DIR then
	a.nlink, a.par = 2, parent
	p.nlink = p.nlink + 1
elseif ty == BLK or ty == CHR then
	a.par = rdev
elseif ty == FILE then
	a.par = 1 -- stored bytes + 1: none yet
	fpar_set(ino, parent)
elseif ty == SYMLINK then
	a.len = #ARGV[9]
	redis.call('SET', key('s', ino), ARGV[9])
end
icache[ino], idirty[ino] = a, true
redis.call('HSET', key('d', parent), name, dent_pack(ino, ty))
touch(parent, true)
redis.call('INCR', 'totalinodes')
quota_add(qc, 0, 1)
if ARGV[10] and ARGV[10] ~= '0' then
	redis.call('HINCRBY', key('o', ino), ARGV[10], 1)
	redis.call('SADD', 'so' .. ARGV[10], d(ino))
end
iflush()
return {0, attr_pack(a), attr_pack(p)}
