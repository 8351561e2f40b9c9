-- lib: snap
-- ARGV: top, sid, src, dst parent, dst name[, dir, record]. Links the
-- finished copy; the same checks as snap_begin, since the namespace
-- moved meanwhile. With dir, the copy is a version of dir: record is
-- its stats and message (SCHEMA.md, v<dir>), stored with top and time.
-- The copy's inodes and stored bytes now count in the quotas above the
-- parent (none for a version): EDQUOT when they do not fit.
local top, sid, src = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local P, name = tonumber(ARGV[4]), ARGV[5]
if not snap_own(top, sid, false) then
	return {ECANCELED}
end
local p, err = getdir(P)
if not p then
	return {err}
end
err = name_guard(P, p, name)
if err ~= 0 then
	return {err}
end
if redis.call('HEXISTS', key('d', P), name) == 1 then
	return {EEXIST}
end
if snap_within(src, P) then
	return {EINVAL}
end
local a = iget(top)
if not a then
	error('granary: snapshot top inode missing')
end
local qc = quota_chain(P)
local qs, qi = snap_quota_made(top)
if quota_room(qc, qs, qi) ~= 0 then
	return {EDQUOT}
end
quota_add(qc, qs, qi)
redis.call('HSET', key('d', P), name, dent_pack(top, DIR))
a.par = P
p.nlink = p.nlink + 1
touch(top, false)
touch(P, true)
if ARGV[6] then
	-- a version of ARGV[6] (P is its versions directory): its record
	redis.call('HSET', 'v' .. ARGV[6], name,
		struct.pack('<I8i8', top, now()) .. ARGV[7])
end
redis.call('HDEL', 'snapshots', d(top))
redis.call('DEL', snap_keys(top))
iflush()
return {0}
