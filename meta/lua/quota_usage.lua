-- ARGV: ino, sid (0: none), the bytes that session accepted for writing
-- below quota ino and has not committed. Publishes them while the
-- session is registered (field of qp<ino>, absent when 0; p<ino> in
-- quotaused is the sum), as space_usage does for the volume. Returns
-- {0, max space, max inodes, used space plus the other sessions'
-- pending bytes, used inodes}, or {ENOENT} when the quota is gone.
local q, sid, p = ARGV[1], ARGV[2], tonumber(ARGV[3])
local r = redis.call('HGET', 'quota', q)
if not r then
	return {ENOENT}
end
local pk = 'qp' .. q
local own = tonumber(redis.call('HGET', pk, sid) or 0)
if sid ~= '0' and p ~= own and redis.call('ZSCORE', 'sessions', sid) then
	if p > 0 then
		redis.call('HSET', pk, sid, d(p))
	else
		redis.call('HDEL', pk, sid)
	end
	redis.call('HINCRBY', 'quotaused', 'p' .. q, d(p - own))
	own = p
end
local ms, mi = struct.unpack(QFMT, r)
local u = redis.call('HMGET', 'quotaused', 's' .. q, 'i' .. q, 'p' .. q)
local us, ui, all = tonumber(u[1] or 0), tonumber(u[2] or 0),
	tonumber(u[3] or 0)
us = math.max(us, 0) + math.max(all - own, 0)
return {0, d(ms), d(mi), d(us), d(math.max(ui, 0))}
