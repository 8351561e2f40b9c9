-- ARGV: ino, records: each a chunk index (u32 LE) and a slice record
-- (full or short), in order; the client's chain (quota_data: used only
-- for a file without a parent field). A slice referenced twice by one
-- call gets the extra reference counted in sliceref. Stored bytes: a
-- data record adds its length (an overwrite is counted again: the sum
-- is clamped to the length), a hole takes away the data it covers.
local ino, recs = tonumber(ARGV[1]), ARGV[2]
local a = iget_data(ino)
if not a then
	return {ENOENT}
end
if a.ty == DIR then
	return {EISDIR}
end
if a.ty ~= FILE then
	return {EINVAL}
end
quota_data(ino, a, ARGV[3])
local seen, len, t0, o = {}, a.len, {}, 1
local st = stored(a)
while o <= #recs do
	local idx = struct.unpack('<I4', recs, o)
	local rl, pos, id, _, _, n = rec_at(recs, o + 4)
	local rec = string.sub(recs, o + 4, o + 3 + rl)
	o = o + 4 + rl
	if id ~= 0 then
		st = st + n
	elseif idx * CHUNK + pos < len then
		-- this call's records of chunk 0 are not in the tail yet
		local c = idx == 0 and tail_get(ino) .. table.concat(t0) or
			redis.call('GET', ckey(ino, idx)) or ''
		st = math.max(0, st - (data_in(c, pos, pos + n) or 0))
	end
	if idx == 0 then
		t0[#t0 + 1] = rec
	else
		redis.call('APPEND', ckey(ino, idx), rec)
	end
	if id ~= 0 then
		if seen[id] then
			redis.call('HINCRBY', 'sliceref', d(id), 1)
		end
		seen[id] = true
	end
	local e = idx * CHUNK + pos + n
	if e > len then
		len = e
	end
end
if #t0 > 0 then
	tail_append(ino, table.concat(t0))
end
local st0 = stored(a)
stored_set(a, st0)
a.len = len
stored_set(a, st)
touch(ino, true)
iflush()
return {0, attr_pack(a)}
