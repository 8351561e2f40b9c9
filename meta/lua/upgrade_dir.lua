-- ARGV: dir, cursor. Format 1 -> 2: entries of 9 bytes (u64 ino, u8
-- type; no entry of format 2 has 9 bytes below inode 2^56) get the
-- short form, about 1000 per call. Returns {0, cursor, rewritten}.
local k, n = key('d', tonumber(ARGV[1])), 0
local r = redis.call('HSCAN', k, ARGV[2], 'COUNT', 1000)
for i = 1, #r[2], 2 do
	local v = r[2][i + 1]
	if #v == 9 then
		local ino, ty = struct.unpack('<I8B', v)
		redis.call('HSET', k, r[2][i], dent_pack(ino, ty))
		n = n + 1
	end
end
return {0, r[1], n}
