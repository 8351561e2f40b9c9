-- lib: lock
-- ARGV: ino, sid, owner, type (1 shared, 2 exclusive), start, end, ttl.
-- F_GETLK: {0, 0} when a POSIX lock of that type on [start, end] would be
-- granted, else {0, 1, type, start, end, pid, sid} of one that is in the
-- way.
local ino, me = tonumber(ARGV[1]), ARGV[2] .. '_' .. ARGV[3]
local ty, s, e = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if ty < 1 or ty > 2 or s > e then
	return {EINVAL}
end
local c = lock_conflict(key('lp', ino), me, ty, s, e, tonumber(ARGV[7]))
if c then
	return {0, 1, c[1], c[2], c[3], c[4], c[5]}
end
return {0, 0}
