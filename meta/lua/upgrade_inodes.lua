-- ARGV: inode numbers. Format 1 -> 2: the record i<ino> (59 attribute
-- bytes, then chunk 0) moves into the inode's hash. Returns {0, moved}.
local n = 0
for i = 1, #ARGV do
	local ino = tonumber(ARGV[i])
	local v = redis.call('GET', key('i', ino))
	if v then
		attr_unpack(string.sub(v, 1, ALEN))
		redis.call('HSET', ib(ino), iaf(ino), string.sub(v, 1, ALEN))
		tail_set(ino, string.sub(v, ALEN + 1), true)
		redis.call('DEL', key('i', ino))
		n = n + 1
	end
end
return {0, n}
