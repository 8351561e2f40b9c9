-- ARGV: dir, name, value (the entry as fsck read it), new ('': remove
-- it). A changed entry gets the type of the inode it names; an entry is
-- removed only while the inode it names does not exist. EAGAIN when the
-- entry or the inode is not as fsck saw them any more. Returns {0}.
local EAGAIN = @EAGAIN@
local dir, name, old, new = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
if redis.call('HGET', key('d', dir), name) ~= old then
	return {EAGAIN}
end
local ino = dent_unpack(old)
if new == '' then
	if iget(ino) then
		return {EAGAIN}
	end
	redis.call('HDEL', key('d', dir), name)
else
	local nino, ty = dent_unpack(new)
	local a = iget(nino)
	if nino ~= ino or not a or a.ty ~= ty then
		return {EAGAIN}
	end
	redis.call('HSET', key('d', dir), name, new)
end
if iget(dir) then
	touch(dir, true)
end
iflush()
return {0}
