-- ARGV: sid, then field, value pairs. Records what session sid's backup
-- did in the hash backup (a success: name, time, sid, host, bytes,
-- inodes, seconds, with failed and error cleared; a failure: failed and
-- error only; no pairs: nothing, a backup cut short by an unmount) and
-- drops sid's claim. Returns {0}.
local sid = ARGV[1]
local ok = false
for i = 2, #ARGV, 2 do
	redis.call('HSET', 'backup', ARGV[i], ARGV[i + 1])
	if ARGV[i] == 'name' then
		ok = true
	end
end
if ok then
	redis.call('HDEL', 'backup', 'failed', 'error')
end
if redis.call('GET', 'backupclaim') == sid then
	redis.call('DEL', 'backupclaim')
end
return {0}
