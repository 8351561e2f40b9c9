-- lib: snap
-- ARGV: dir, top, sid. top is sid's finished detached copy of a
-- version of dir: dir's entries and top's change places (dir keeps
-- its inode, attributes and versions; subdirectories get their new
-- parent), then top, now holding dir's old entries, is left to sid to
-- drop (its walk restarted at the top with source 0); the root's trash
-- stays the root's. Returns {0}.
-- The quotas above dir (its own included) count the restored entries
-- at once, and lose the old ones as the drop deletes them (snapquota).
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
-- the root's trash stays: a restore changes the namespace, not what was
-- removed from it. A version of the root made when snapshots still
-- copied the trash holds a plain copy of it: that goes with the old
-- entries, to be dropped.
if D == 1 then
	local t = trash_ino()
	local e = t and redis.call('HGET', dC, TRASH)
	if e and dent_unpack(e) == t then
		local copy = redis.call('HGET', dD, TRASH)
		redis.call('HSET', dD, TRASH, e)
		if copy then
			redis.call('HSET', dC, TRASH, copy)
		else
			redis.call('HDEL', dC, TRASH)
		end
	end
end
-- the subdirectories of k get parent par, and its regular files their
-- parent field; returns how many subdirectories
local function adopt(k, par)
	local n = 0
	for _, e in ipairs(redis.call('HVALS', k)) do
		local ino, ty = dent_unpack(e)
		local s = ty == DIR and iget(ino)
		if s then
			s.par = par
			idirty[ino] = true
			n = n + 1
		elseif ty == FILE then
			fpar_set(ino, par)
		end
	end
	return n
end
a.nlink = 2 + adopt(dD, D)
ca.nlink = 2 + adopt(dC, C)
idirty[C] = true
touch(D, true)
local qc = quota_chain(D)
local qs, qi = snap_quota_made(C)
-- C's own inode stays out: D keeps its own
quota_add(qc, qs, math.max(qi - 1, 0))
local dk, mk, qk = snap_keys(C)
redis.call('DEL', dk, mk, qk)
redis.call('RPUSH', dk, struct.pack(PAIR, 0, C))
if #qc > 0 then
	local names = {}
	for i, q in ipairs(qc) do
		names[i] = d(q)
	end
	redis.call('HSET', qk, 'c', table.concat(names, ','))
end
-- quotas below D's old entries are detached now: the clients' cached
-- chains may name them
if quota_any() then
	redis.call('INCR', 'quotagen')
end
iflush()
return {0}
