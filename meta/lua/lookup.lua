-- ARGV: parent, name, whole (1: the whole inode record, with chunk
-- 0 behind the attributes). Returns {0, ino, packed attr[+chunk 0]}.
local parent, name = tonumber(ARGV[1]), ARGV[2]
local e = redis.call('HGET', key('d', parent), name)
if not e and name == VERSIONS then
	-- the directory's versions, reached by lookup, never listed
	local v = redis.call('HGET', 'vdirs', d(parent))
	e = v and dent_pack(tonumber(v), DIR)
end
if not e then
	local _, err = getdir(parent)
	return {err or ENOENT}
end
local ino = dent_unpack(e)
local s
if ARGV[3] == '1' then
	s = irec(ino)
else
	s = redis.call('HGET', ib(ino), iaf(ino))
end
if not s then
	return {ENOENT}
end
return {0, ino, s}
