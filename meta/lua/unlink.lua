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
if ty == DIR then
	return {EISDIR}
end
redis.call('HDEL', key('d', parent), name)
touch(parent, true)
local a = iget(ino)
if a then
	if a.nlink > 0 then
		a.nlink = a.nlink - 1
	end
	touch(ino, false)
	inode_release(ino)
end
iflush()
return {0}
