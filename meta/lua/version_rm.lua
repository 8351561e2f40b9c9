-- lib: snap
-- ARGV: dir, tag, sid. Unlinks version tag of dir and hands its tree
-- to sid for snap_drop (detached, listed in snapshots, the walk
-- starting at its top with source 0). Returns {0, top}.
local D, tag, sid = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local v = redis.call('HGET', 'vdirs', d(D))
local r = v and redis.call('HGET', key('v', D), tag)
if not r then
	local _, err = getdir(D)
	return {err or ENOENT}
end
local V, top = tonumber(v), struct.unpack('<I8', r)
redis.call('HDEL', key('v', D), tag)
redis.call('HDEL', key('d', V), tag)
local va = iget(V)
va.nlink = va.nlink - 1
touch(V, true)
local ta = iget(top)
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
