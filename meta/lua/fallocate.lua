-- ARGV: ino, mode (0 or 1 = FALLOC_FL_KEEP_SIZE), offset, length, the
-- client's chain (quota_data: used only for a file without a parent
-- field). Space is not reserved (the object store has none to
-- reserve): only the length.
-- The range counts as stored bytes, as a write of it would (clamped to
-- the length), so that the space is taken from the volume's capacity.
local ino, mode = tonumber(ARGV[1]), tonumber(ARGV[2])
local e = tonumber(ARGV[3]) + tonumber(ARGV[4])
local a = iget_data(ino)
if not a then
	return {ENOENT}
end
if a.ty == DIR then
	return {EISDIR}
end
if a.ty ~= FILE then
	return {ENODEV}
end
quota_data(ino, a, ARGV[5])
local st = stored(a)
stored_set(a, st)
if mode == 0 and e > a.len then
	a.len = e
	touch(ino, true)
else
	touch(ino, false)
end
stored_set(a, st + tonumber(ARGV[4]))
iflush()
return {0, attr_pack(a)}
