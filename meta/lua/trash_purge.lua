-- lib: trash
-- ARGV: hour directory inode, its name in the trash, entries to delete
-- at most (about: one HSCAN page). Deletes them for good, as unlink and
-- rmdir inside the trash do (a file still open somewhere lives on until
-- its last close); once the hour directory is empty, it goes too.
-- Returns {0, entries deleted, 1 when the hour directory is gone}. Calls
-- may overlap: each entry goes in exactly one.
local h, hname, count = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local t = trash_ino()
local ha = iget(h)
if not t or not ha or ha.ty ~= DIR or ha.par ~= t then
	return {0, 0, 1}
end
local page = redis.call('HSCAN', key('d', h), '0', 'COUNT', count)[2]
local n = 0
for i = 1, #page - 1, 2 do
	local tname = page[i]
	local ino, ty = dent_unpack(page[i + 1])
	local a = iget(ino)
	-- a removed directory is empty, and nothing can be made in it;
	-- one that is not is left alone rather than orphan what it holds
	if ty ~= DIR or redis.call('EXISTS', key('d', ino)) == 0 then
		redis.call('HDEL', key('d', h), tname)
		n = n + 1
		if a then
			trash_take(h, tname, a)
			if ty == DIR then
				ha.nlink = ha.nlink - 1
				inode_destroy(ino)
			else
				link_drop(ino, a, h)
			end
		end
	end
end
if n > 0 then
	touch(h, true)
end
local gone = 0
if redis.call('EXISTS', key('d', h)) == 0 and
	redis.call('HGET', key('d', t), hname) == dent_pack(h, DIR) then
	redis.call('HDEL', key('d', t), hname)
	local ta = iget(t)
	ta.nlink = ta.nlink - 1
	touch(t, true)
	trash_hour_drop(h)
	inode_destroy(h)
	gone = 1
end
iflush()
return {0, n, gone}
