-- ARGV: ino, name, value, flags (1 = XATTR_CREATE, 2 = XATTR_REPLACE).
local ino, name, flags = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[4])
if not iget(ino) then
	return {ENOENT}
end
local k = key('x', ino)
local has = redis.call('HEXISTS', k, name) == 1
if flags == 1 and has then
	return {EEXIST}
end
if flags == 2 and not has then
	return {ENODATA}
end
redis.call('HSET', k, name, ARGV[3])
touch(ino, false)
iflush()
return {0}
