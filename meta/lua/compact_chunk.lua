-- ARGV: ino, idx, plen, sha, delay, records. A compaction: the first plen
-- bytes of chunk idx's slice records, which the compactor read and whose
-- SHA1 (hex) is sha, are replaced by records (fresh slices holding the
-- same bytes, each referenced once); records appended since stay after
-- them. The old records' references go; a slice left without one waits
-- in delayslices until delay seconds from now (a reader holding the old
-- list keeps reading it meanwhile), then reclaim hands it out. EAGAIN
-- when those bytes are no longer the list's start (a truncate, another
-- compaction): nothing changes, and the fresh slices are the caller's to
-- delete. Length, times and stored bytes stay: the bytes are the same.
local ino, idx, plen = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local sha, delay, recs = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local a = iget(ino)
if not a then
	return {ENOENT}
end
if a.ty ~= FILE then
	return {EINVAL}
end
local cur
if idx == 0 then
	cur = tail_get(ino)
else
	cur = redis.call('GET', ckey(ino, idx)) or ''
end
if #cur < plen or redis.sha1hex(string.sub(cur, 1, plen)) ~= sha then
	return {@EAGAIN@}
end
local due = now() + delay
local o, old = 1, string.sub(cur, 1, plen)
while o <= #old do
	local n, _, id = rec_at(old, o)
	if id ~= 0 then
		local r = redis.call('HINCRBY', 'sliceref', d(id), -1)
		if r <= 0 then
			redis.call('HDEL', 'sliceref', d(id))
		end
		if r < 0 then
			redis.call('ZADD', 'delayslices', due,
				string.sub(old, o, o + n - 1))
		end
	end
	o = o + n
end
local new = recs .. string.sub(cur, plen + 1)
if idx == 0 then
	tail_set(ino, new, false)
else
	redis.call('SET', ckey(ino, idx), new)
end
return {0}
