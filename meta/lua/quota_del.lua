-- ARGV: ino. Removes the quota of directory ino and its usage.
local ino = tonumber(ARGV[1])
if redis.call('HEXISTS', 'quota', d(ino)) == 0 then
	return {ENOENT}
end
quota_drop(ino)
return {0}
