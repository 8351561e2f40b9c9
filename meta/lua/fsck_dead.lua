-- ARGV: id, pack. The dead records of slice id (id 0: of the whole pack)
-- that fsck found still referenced, and whose objects it found in the
-- store: removed from delslices, delayslices and stagedead, so that no
-- reclamation deletes them. A pass over delslices and delayslices (short
-- lists: reclamation drains them). EAGAIN when none was left (a
-- reclamation took it meanwhile). Returns {0}.
local EAGAIN = @EAGAIN@
local id, pack = tonumber(ARGV[1]), tonumber(ARGV[2])
local function mine(rec)
	if string.byte(rec, 1) == 5 then
		local _, p = struct.unpack('<BI8', rec)
		return id == 0 and p == pack
	end
	local ok, _, _, rid = pcall(rec_at, rec, 1)
	return ok and id ~= 0 and rid == id
end
local n = 0
for _, rec in ipairs(redis.call('LRANGE', 'delslices', 0, -1)) do
	if mine(rec) then
		n = n + redis.call('LREM', 'delslices', 0, rec)
	end
end
for _, rec in ipairs(redis.call('ZRANGE', 'delayslices', 0, -1)) do
	if mine(rec) then
		n = n + redis.call('ZREM', 'delayslices', rec)
	end
end
local k = id ~= 0 and d(id) or 'p' .. d(pack)
if redis.call('HDEL', 'stagedead', k) == 1 then
	n = n + 1
end
if n == 0 then
	return {EAGAIN}
end
return {0}
