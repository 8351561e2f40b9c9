-- ARGV: ttl, cap. The slices compactions replaced (delayslices) wait out
-- their delay for readers that still hold an old chunk list; readers are
-- mounted clients. With no live session (none whose heartbeat is younger
-- than ttl seconds) nobody can hold one: up to cap of them join delslices
-- now, whatever their time (reclaim hands them out). cap 0 only counts.
-- Returns {0, moved, left in delayslices, live sessions}.
local ttl, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local live = redis.call('ZCOUNT', 'sessions', now() - ttl, '+inf')
local moved = 0
if live == 0 and cap > 0 then
	for _, rec in ipairs(redis.call('ZRANGE', 'delayslices', 0, cap - 1)) do
		redis.call('ZREM', 'delayslices', rec)
		redis.call('RPUSH', 'delslices', rec)
		moved = moved + 1
	end
end
return {0, moved, redis.call('ZCARD', 'delayslices'), live}
