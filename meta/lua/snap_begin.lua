-- lib: snap
-- ARGV: src, dst parent, dst name, sid, cred. A non-directory is copied
-- and linked here; a directory gets its detached top copy, listed in
-- snapshots, for snap_copy to fill. Returns {0, linked (1: done),
-- new ino, files, dirs, others, bytes}. A copy counts in the quotas above
-- its parent (a tree once linked, snap_commit): EDQUOT when it does not
-- fit, or for a tree when no inode is left.
local src, P, name, sid = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3],
	ARGV[4]
cred_use(ARGV[5])
local p, err = getdir(P)
if not p then
	return {err}
end
err = name_guard(P, p, name)
if err ~= 0 then
	return {err}
end
local v = irec(src)
if not v then
	return {ENOENT}
end
local sa = attr_unpack(string.sub(v, 1, ALEN))
-- unlinked but still open: gone for the namespace, as for link
if sa.ty ~= DIR and sa.nlink == 0 then
	return {ENOENT}
end
if not may_copy(v) then
	return {EACCES}
end
if redis.call('HEXISTS', key('d', P), name) == 1 then
	return {EEXIST}
end
if sa.ty == DIR and snap_within(src, P) then
	return {EINVAL}
end
-- a restore builds its copy under the one name P never holds: it
-- replaces P's tree (version_swap) rather than adding to it
local qc = name ~= VERSIONS and quota_chain(P) or {}
local qs = sa.ty ~= DIR and qbytes(sa) or 0
if quota_room(qc, qs, 1) ~= 0 then
	return {EDQUOT}
end
local ino = redis.call('INCRBY', 'nextinode', 1)
local top
if sa.ty ~= DIR then
	clone(src, v, ino, 1, P)
	redis.call('HSET', key('d', P), name, dent_pack(ino, sa.ty))
	touch(P, true)
	quota_add(qc, qs, 1)
else
	-- detached: parent 0 until snap_commit links it
	clone(src, v, ino, 2, 0)
	local dk = snap_keys(ino)
	redis.call('RPUSH', dk, struct.pack(PAIR, src, ino))
	snap_set(ino, sid, false)
	top = ino
end
made_flush(top)
iflush()
local f, nd, o, b = made()
return {0, sa.ty ~= DIR and 1 or 0, ino, f, nd, o, b}
