-- ARGV: ino, length, the client's chain (quota_data: used only for a
-- file without a parent field).
local ino, nl = tonumber(ARGV[1]), tonumber(ARGV[2])
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
local ol = a.len
-- stored bytes: a shorter file keeps at most its length, a longer one
-- (sparse) what it had
stored_set(a, math.min(stored(a), nl))
if nl < ol then
	-- chunks entirely past the new length go; cost is one step per chunk
	-- of the old length, sparse or not
	for idx = math.ceil(nl / CHUNK), math.ceil(ol / CHUNK) - 1 do
		chunk_cut(ino, idx)
	end
	-- the boundary chunk keeps its slices; a hole over the cut-off tail
	-- makes a later extension read zeros there
	local pos = nl % CHUNK
	if pos ~= 0 then
		local idx, s = math.floor(nl / CHUNK)
		if idx == 0 then
			s = tail_get(ino)
		else
			s = redis.call('GET', ckey(ino, idx))
		end
		local o = 1
		while s and o <= #s do
			local n, p, id, _, _, len = rec_at(s, o)
			if id ~= 0 and p + len > pos then
				local hole = struct.pack(RFMT, 1, pos, 0, 0, 0,
					CHUNK - pos)
				if idx == 0 then
					tail_append(ino, hole)
				else
					redis.call('APPEND', ckey(ino, idx), hole)
				end
				break
			end
			o = o + n
		end
	end
end
a.len = nl
touch(ino, true)
iflush()
return {0, attr_pack(a)}
