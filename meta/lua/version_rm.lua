-- lib: snap
-- ARGV: dir, tag, sid, uid (decimal; empty: root, no check). Unlinks
-- version tag of dir and hands its tree to sid for snap_drop (detached,
-- listed in snapshots, the walk starting at its top with source 0).
-- In a sticky dir (mode 01000), as unlink(2) in one, only the owner of
-- the version (its top's uid), the owner of dir or root may remove it:
-- EPERM for another uid, checked here, with the removal. Returns
-- {0, top}.
local S_ISVTX = 512 --C: S_ISVTX
local D, tag, sid = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local uid = tonumber(ARGV[4])
local v = redis.call('HGET', 'vdirs', d(D))
local r = v and redis.call('HGET', key('v', D), tag)
if not r then
	local _, err = getdir(D)
	return {err or ENOENT}
end
local V, top = tonumber(v), struct.unpack('<I8', r)
local ta = iget(top)
if uid and uid ~= 0 then
	local da = iget(D)
	if da and bit.band(da.mode, S_ISVTX) ~= 0 and uid ~= da.uid and
		not (ta and ta.uid == uid) then
		return {EPERM}
	end
end
redis.call('HDEL', key('v', D), tag)
redis.call('HDEL', key('d', V), tag)
local va = iget(V)
va.nlink = va.nlink - 1
touch(V, true)
if ta then
	ta.par = 0
	idirty[top] = true
end
redis.call('DEL', snap_keys(top))
local dk = snap_keys(top)
redis.call('RPUSH', dk, struct.pack(PAIR, 0, top))
snap_set(top, sid, false)
iflush()
return {0, top}
