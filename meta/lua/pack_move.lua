-- ARGV: ino, idx, old, new. A pack compaction: every record of chunk idx
-- of ino that is exactly old (a packed slice's record) becomes new (the
-- same slice, its frame now in another pack: same form and length).
-- References do not change. Returns {0, records replaced}: 0 when the
-- record is gone meanwhile (the file overwritten, truncated or deleted).
local ino, idx, old, new = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3],
	ARGV[4]
if #old ~= #new then
	return {EINVAL}
end
local a = iget(ino)
if not a or a.ty ~= FILE then
	return {0, 0}
end
local cur
if idx == 0 then
	cur = tail_get(ino)
else
	cur = redis.call('GET', ckey(ino, idx)) or ''
end
local out, o, n = {}, 1, 0
while o <= #cur do
	local k = rec_at(cur, o)
	local rec = string.sub(cur, o, o + k - 1)
	if rec == old then
		rec = new
		n = n + 1
	end
	out[#out + 1] = rec
	o = o + k
end
if n > 0 then
	if idx == 0 then
		tail_set(ino, table.concat(out), false)
	else
		redis.call('SET', ckey(ino, idx), table.concat(out))
	end
end
return {0, n}
