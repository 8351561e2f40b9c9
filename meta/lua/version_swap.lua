-- lib: snap
-- ARGV: dir, top, sid. top is sid's finished detached copy of a
-- version of dir: dir's entries and top's change places (dir keeps
-- its inode, attributes and versions; subdirectories get their new
-- parent), then top, now holding dir's old entries, is left to sid to
-- drop (its walk restarted at the top with source 0). Returns {0}.
local D, C, sid = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if not snap_own(C, sid, false) then
	return {ECANCELED}
end
local a, err = getdir(D)
if not a then
	return {err}
end
local ca = iget(C)
if not ca then
	error('granary: snapshot top inode missing')
end
local dD, dC, tmp = key('d', D), key('d', C), 'vswap:' .. d(C)
local hasD = redis.call('EXISTS', dD) == 1
if hasD then
	redis.call('RENAME', dD, tmp)
end
if redis.call('EXISTS', dC) == 1 then
	redis.call('RENAME', dC, dD)
end
if hasD then
	redis.call('RENAME', tmp, dC)
end
-- the subdirectories of k get parent par; returns how many
local function adopt(k, par)
	local n = 0
	for _, e in ipairs(redis.call('HVALS', k)) do
		local ino, ty = dent_unpack(e)
		local s = ty == DIR and iget(ino)
		if s then
			s.par = par
			idirty[ino] = true
			n = n + 1
		end
	end
	return n
end
a.nlink = 2 + adopt(dD, D)
ca.nlink = 2 + adopt(dC, C)
idirty[C] = true
touch(D, true)
local dk, mk = snap_keys(C)
redis.call('DEL', dk, mk)
redis.call('RPUSH', dk, struct.pack(PAIR, 0, C))
iflush()
return {0}
