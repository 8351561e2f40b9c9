-- ARGV: what ('totalinodes', 'usedspace' or 'sliceref'), slice id
-- (sliceref), was, now. The counter (the slice's references beyond the
-- first, absent = 0) becomes now if it is still was, else EAGAIN: it
-- moved since fsck counted. Returns {0}.
local EAGAIN = @EAGAIN@
local what, id, was, new = ARGV[1], ARGV[2], tonumber(ARGV[3]),
	tonumber(ARGV[4])
local cur
if what == 'sliceref' then
	cur = redis.call('HGET', 'sliceref', id)
elseif what == 'totalinodes' or what == 'usedspace' then
	cur = redis.call('GET', what)
else
	return {EINVAL}
end
if tonumber(cur or '0') ~= was then
	return {EAGAIN}
end
if what ~= 'sliceref' then
	redis.call('SET', what, d(new))
elseif new == 0 then
	redis.call('HDEL', 'sliceref', id)
else
	redis.call('HSET', 'sliceref', id, d(new))
end
return {0}
