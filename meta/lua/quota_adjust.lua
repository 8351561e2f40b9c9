-- ARGV: ino, bytes, inodes (signed). Adds them to the usage of the
-- quota of ino (a recount's correction).
local ino, ds, di = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('HEXISTS', 'quota', ino) == 0 then
	return {ENOENT}
end
quota_add({tonumber(ino)}, ds, di)
return {0}
