-- ARGV: ino, newparent, newname.
local ino, parent, name = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local a = iget(ino)
if not a or a.nlink == 0 then
	return {ENOENT}
end
if a.ty == DIR then
	return {EPERM}
end
local p, err = getdir(parent)
if not p then
	return {err}
end
err = name_guard(parent, p, name)
if err ~= 0 then
	return {err}
end
if redis.call('HEXISTS', key('d', parent), name) == 1 then
	return {EEXIST}
end
redis.call('HSET', key('d', parent), name, dent_pack(ino, a.ty))
a.nlink = a.nlink + 1
touch(ino, false)
touch(parent, true)
iflush()
return {0, attr_pack(a)}
