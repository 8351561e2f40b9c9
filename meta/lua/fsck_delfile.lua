-- ARGV: ino, length. The delfiles member '<ino>:<length>' of an inode
-- that exists: removed, so that reclamation does not drop the chunk
-- lists of a live file (a deletion adds the member in the script that
-- deletes the inode, so both together are never a client's doing).
-- EAGAIN when the inode is gone or the member is. Returns {0}.
local EAGAIN = @EAGAIN@
local ino, m = tonumber(ARGV[1]), ARGV[1] .. ':' .. ARGV[2]
if redis.call('HEXISTS', ib(ino), iaf(ino)) == 0 or
	not redis.call('ZSCORE', 'delfiles', m) then
	return {EAGAIN}
end
redis.call('ZREM', 'delfiles', m)
return {0}
