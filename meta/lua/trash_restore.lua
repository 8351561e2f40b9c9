-- lib: trash
-- ARGV: hour directory inode, entry name in it, new parent, new name.
-- Puts the entry back in the namespace under the new name: ENOENT when
-- the entry or the parent is gone, EEXIST when the name is taken, EPERM
-- when the parent is in the trash (restore it first), EDQUOT when it
-- does not fit in the quotas above the parent (the trash is outside
-- every quota: a restore counts again, as a move into them would).
-- Returns {0, ino}.
local h, tname = tonumber(ARGV[1]), ARGV[2]
local np, nn = tonumber(ARGV[3]), ARGV[4]
local ha = iget(h)
if not ha or ha.ty ~= DIR or trash_depth(h, ha) ~= 2 then
	return {ENOENT}
end
local e = redis.call('HGET', key('d', h), tname)
if not e then
	return {ENOENT}
end
local ino, ty = dent_unpack(e)
local npa, err = getdir(np)
if not npa then
	return {err}
end
err = name_guard(np, npa, nn)
if err ~= 0 then
	return {err}
end
if redis.call('HEXISTS', key('d', np), nn) == 1 then
	return {EEXIST}
end
local a = iget(ino)
if not a then
	error('granary: directory entry without inode')
end
-- a directory comes back empty (its entries follow one by one)
local qc = quota_chain(np)
if quota_room(qc, qbytes(a), 1) ~= 0 then
	return {EDQUOT}
end
quota_add(qc, qbytes(a), 1)
trash_take(h, tname, a)
redis.call('HDEL', key('d', h), tname)
redis.call('HSET', key('d', np), nn, e)
if ty == DIR then
	a.par = np
	ha.nlink = ha.nlink - 1
	npa.nlink = npa.nlink + 1
	-- its chain was the trash's (none): the clients' cached chain
	-- of it is stale now (the data scripts trust a chain of the
	-- current generation)
	if quota_any() then
		redis.call('INCR', 'quotagen')
	end
elseif a.ty == FILE then
	fpar_set(ino, np)
end
touch(h, true)
touch(np, true)
touch(ino, false)
iflush()
return {0, ino}
