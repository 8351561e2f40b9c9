-- ARGV: ino, newparent, newname, hint (a directory holding a name of
-- ino; '0' or none: not known). A hard link is the same inode: it stays
-- in the quotas that count it, so a link whose parent's chain is not
-- the file's is EXDEV (ln then fails, as across project quotas), and one
-- inside the chain changes no usage. A regular file's chain is that of
-- its parent field; the hint serves only a file without one (which then
-- gets newparent), and other types (not checked when '0').
local ino, parent, name = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local hint = tonumber(ARGV[4] or '0')
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
-- the file's chain: its parent field's (the trash's: none), else the
-- hint's
local home, hc = a.ty == FILE and fpar(ino) or 0, nil
if home < 0 then
	hc = {}
elseif home > 0 then
	hc = quota_chain(home)
elseif hint ~= 0 then
	hc = quota_chain(hint)
end
if hc and not quota_same(quota_chain(parent), hc) then
	return {EXDEV}
end
if a.ty == FILE and home == 0 then
	fpar_set(ino, parent)
end
redis.call('HSET', key('d', parent), name, dent_pack(ino, a.ty))
a.nlink = a.nlink + 1
touch(ino, false)
touch(parent, true)
iflush()
return {0, attr_pack(a)}
