-- ARGV: ino, name.
local ino = tonumber(ARGV[1])
if not iget(ino) then
	return {ENOENT}
end
if redis.call('HDEL', key('x', ino), ARGV[2]) == 0 then
	return {ENODATA}
end
touch(ino, false)
iflush()
return {0}
