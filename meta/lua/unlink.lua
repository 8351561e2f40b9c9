-- lib: trash
-- ARGV: parent, name. Returns {0, the inode moved into the trash (0:
-- none: the name was not the last, or the trash is off, or this was a
-- deletion inside the trash, which is final), the parent's attributes
-- as the unlink left them (not for a parent in the trash, whose
-- directories other removals change: a client keeps no copy of them)}.
-- The last name leaves the quotas above the parent, into the trash too
-- (outside every quota).
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
local depth = trash_depth(parent, p)
redis.call('HDEL', key('d', parent), name)
touch(parent, true)
local a, trashed = iget(ino), 0
if a then
	if depth == 2 then
		trash_take(parent, name, a)
	end
	if a.nlink == 1 then
		quota_add(quota_chain(parent), -qbytes(a), -1)
	end
	if a.nlink == 1 and depth == 0 and trash_put(parent, name, ino, a) then
		trashed = ino
	else
		link_drop(ino, a, parent)
	end
end
iflush()
if depth ~= 0 then
	return {0, trashed}
end
return {0, trashed, attr_pack(p)}
