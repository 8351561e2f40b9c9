-- ARGV: sid, interval, ttl, retry (seconds). Claims the volume's next
-- metadata backup for session sid (one client at a time writes one):
-- when the last backup began at least interval seconds ago, the last
-- failure is at least retry seconds old, and no other session holds a
-- claim. The claim lasts ttl seconds (a client that dies with it frees
-- it that way). Returns {0} claimed, {EBUSY} another session holds it,
-- or {EAGAIN} not due yet.
local EAGAIN = @EAGAIN@
local sid = ARGV[1]
local interval, ttl, retry = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local s = now()
local holder = redis.call('GET', 'backupclaim')
if holder and holder ~= sid then
	return {EBUSY}
end
local f = redis.call('HMGET', 'backup', 'time', 'failed')
if s - tonumber(f[1] or '0') < interval or s - tonumber(f[2] or '0') < retry then
	return {EAGAIN}
end
redis.call('SET', 'backupclaim', sid, 'EX', ttl)
return {0}
