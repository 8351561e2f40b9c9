-- ARGV: parent, name.
local parent, name = tonumber(ARGV[1]), ARGV[2]
local p, err = getdir(parent)
if not p then
	return {err}
end
local e = redis.call('HGET', key('d', parent), name)
if not e then
	return {ENOENT}
end
local ino, ty = dent_unpack(e)
if ty ~= DIR then
	return {ENOTDIR}
end
if ino == 1 then
	return {EBUSY}
end
if redis.call('HLEN', key('d', ino)) > 0 then
	return {ENOTEMPTY}
end
redis.call('HDEL', key('d', parent), name)
if p.nlink > 2 then
	p.nlink = p.nlink - 1
end
touch(parent, true)
if iget(ino) then
	inode_destroy(ino)
end
iflush()
return {0}
