-- ARGV: sid (0: none), the bytes that session has accepted and not
-- committed. Publishes them while the session is registered (field of
-- sessionpending, absent when 0; pendingspace is the sum of the hash).
-- Returns {0, usedspace, pendingspace less the session's own}.
local sid, p = ARGV[1], tonumber(ARGV[2])
local own = tonumber(redis.call('HGET', 'sessionpending', sid) or 0)
if sid ~= '0' and p ~= own and redis.call('ZSCORE', 'sessions', sid) then
	if p > 0 then
		redis.call('HSET', 'sessionpending', sid, d(p))
	else
		redis.call('HDEL', 'sessionpending', sid)
	end
	redis.call('INCRBY', 'pendingspace', d(p - own))
	own = p
end
local all = tonumber(redis.call('GET', 'pendingspace') or 0)
local used = tonumber(redis.call('GET', 'usedspace') or 0)
return {0, used > 0 and used or 0, all > own and all - own or 0}
