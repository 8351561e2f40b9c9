-- ARGV: ino, length. The chunk lists of an inode that does not exist
-- (EAGAIN when it does) and is in no delfiles member, handed to
-- reclamation as the chunks of a deleted file of that length: a tail
-- field left in the inode's hash moves to c<ino>_0 first, as inode
-- deletion does. Returns {0}.
local EAGAIN = @EAGAIN@
local ino, len = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('HEXISTS', ib(ino), iaf(ino)) == 1 then
	return {EAGAIN}
end
local t = redis.call('HGET', ib(ino), itf(ino))
if t then
	redis.call('APPEND', ckey(ino, 0), t)
	redis.call('HDEL', ib(ino), itf(ino))
end
redis.call('ZADD', 'delfiles', now(), d(ino) .. ':' .. d(len))
return {0}
