-- ARGV: ino, set (META_SET_*), mode, uid, gid, atime, atimens, mtime,
-- mtimens.
local ino, set = tonumber(ARGV[1]), tonumber(ARGV[2])
local a = iget(ino)
if not a then
	return {ENOENT}
end
-- the trash and its hour directories keep their owner and mode (root's,
-- 0700): what is removed stays out of others' sight
if a.ty == DIR and (bit.band(set, 7) ~= 0) then
	local depth = trash_depth(ino, a)
	if depth == 1 or depth == 2 then
		return {EPERM}
	end
end
local function has(f)
	return bit.band(set, f) ~= 0
end
local s, ns = now()
if has(1) then
	a.mode = bit.band(tonumber(ARGV[3]), 4095)
end
local chown = false
if has(2) and a.uid ~= tonumber(ARGV[4]) then
	a.uid, chown = tonumber(ARGV[4]), true
end
if has(4) and a.gid ~= tonumber(ARGV[5]) then
	a.gid, chown = tonumber(ARGV[5]), true
end
-- a new owner must not inherit set-id powers (setgid without group exec
-- is mandatory locking, not a power: it stays)
if chown and a.ty ~= DIR then
	a.mode = bit.band(a.mode, bit.bnot(S_ISUID))
	if bit.band(a.mode, S_IXGRP) ~= 0 then
		a.mode = bit.band(a.mode, bit.bnot(S_ISGID))
	end
end
if has(32) then
	a.as, a.an = s, ns
elseif has(8) then
	a.as, a.an = tonumber(ARGV[6]), tonumber(ARGV[7])
end
if has(64) then
	a.ms, a.mn = s, ns
elseif has(16) then
	a.ms, a.mn = tonumber(ARGV[8]), tonumber(ARGV[9])
end
a.cs, a.cn = s, ns
idirty[ino] = true
iflush()
return {0, attr_pack(a)}
