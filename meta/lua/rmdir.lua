-- lib: trash
-- ARGV: parent, name. An empty directory removed goes into the trash
-- when there is one; inside the trash, removal is final (an hour
-- directory emptied by hand too), and the trash itself stays (EPERM).
-- It leaves the quotas above the parent, and its own quota goes.
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
if ino == trash_ino() then
	return {EPERM}
end
if redis.call('HLEN', key('d', ino)) > 0 then
	return {ENOTEMPTY}
end
local depth = trash_depth(parent, p)
redis.call('HDEL', key('d', parent), name)
if p.nlink > 2 then
	p.nlink = p.nlink - 1
end
touch(parent, true)
local a = iget(ino)
if a then
	quota_add(quota_chain(parent), 0, -1)
	quota_drop(ino)
	if depth == 1 then
		trash_hour_drop(ino)
	elseif depth == 2 then
		trash_take(parent, name, a)
	end
	if depth ~= 0 or not trash_put(parent, name, ino, a) then
		inode_destroy(ino)
	end
end
iflush()
return {0}
