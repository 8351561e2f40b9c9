-- ARGV: inodes (none: every quota). Returns {0, then per quota found:
-- ino, max space, max inodes, used space, used inodes, pending}; an
-- inode without a quota is left out.
local inos = ARGV
if #inos == 0 then
	inos = redis.call('HKEYS', 'quota')
end
local out = {0}
for _, q in ipairs(inos) do
	local r = redis.call('HGET', 'quota', q)
	if r then
		local ms, mi = struct.unpack(QFMT, r)
		local u = redis.call('HMGET', 'quotaused', 's' .. q, 'i' .. q,
			'p' .. q)
		local us, ui, p = tonumber(u[1] or 0), tonumber(u[2] or 0),
			tonumber(u[3] or 0)
		out[#out + 1] = q
		out[#out + 1] = d(ms)
		out[#out + 1] = d(mi)
		out[#out + 1] = d(us > 0 and us or 0)
		out[#out + 1] = d(ui > 0 and ui or 0)
		out[#out + 1] = d(p > 0 and p or 0)
	end
end
return out
