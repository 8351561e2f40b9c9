-- lib: snap
-- ARGV: dir. The versions directory of dir (dir/.versions), made when
-- missing: mode 0555, dir's owners, parent dir, listed in no
-- directory (vdirs maps dir to it). Returns {0, its inode}.
local D = tonumber(ARGV[1])
local a, err = getdir(D)
if not a then
	return {err}
end
local v = redis.call('HGET', 'vdirs', d(D))
if v then
	return {0, tonumber(v)}
end
local ino = redis.call('INCRBY', 'nextinode', 1)
local s, ns = now()
icache[ino] = {ty = DIR, mode = 365, uid = a.uid, gid = a.gid,
	nlink = 2, len = 0, par = D, as = s, an = ns, ms = s, mn = ns,
	cs = s, cn = ns}
idirty[ino] = true
redis.call('HSET', 'vdirs', d(D), d(ino))
redis.call('INCR', 'totalinodes')
iflush()
return {0, ino}
