-- ARGV: sid, the inodes closed (u64 LE each; a client sends its
-- closes in batches). Returns {0, how many inodes were deleted}.
local sid, inos, freed = ARGV[1], ARGV[2], 0
for o = 1, #inos - 7, 8 do
	local ino = struct.unpack('<I8', inos, o)
	if sid ~= '0' then
		if redis.call('HINCRBY', key('o', ino), sid, -1) <= 0 then
			redis.call('HDEL', key('o', ino), sid)
			redis.call('SREM', 'so' .. sid, d(ino))
		end
	end
	if inode_release(ino) then
		freed = freed + 1
	end
end
iflush()
return {0, freed}
