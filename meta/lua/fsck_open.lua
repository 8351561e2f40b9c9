-- ARGV: sid, ino ('': the inodes of so<sid>, 1000 a call). Opens of
-- session sid, which is no longer in sessions (EAGAIN when it is again),
-- removed as the cleanup of a dead session removes them: the field of
-- o<ino>, the member of so<sid>, and the inode when that was the last
-- open of an unlinked file. Returns {0, members of so<sid> left}.
local EAGAIN = @EAGAIN@
local sid = ARGV[1]
if redis.call('ZSCORE', 'sessions', sid) then
	return {EAGAIN}
end
local inos = {ARGV[2]}
if ARGV[2] == '' then
	inos = redis.call('SPOP', 'so' .. sid, 1000)
end
for _, i in ipairs(inos) do
	local ino = tonumber(i)
	redis.call('HDEL', key('o', ino), sid)
	redis.call('SREM', 'so' .. sid, i)
	inode_release(ino)
end
iflush()
return {0, redis.call('SCARD', 'so' .. sid)}
