-- ARGV: what ('totalinodes', 'usedspace', 'sliceref' or 'packdead'),
-- slice or pack id (sliceref, packdead), was, now. The counter (the
-- slice's references beyond the first, the pack's dead bytes; absent =
-- 0) becomes now if it is still was, else EAGAIN: it moved since fsck
-- counted. Returns {0}.
local EAGAIN = @EAGAIN@
local what, id, was, new = ARGV[1], ARGV[2], tonumber(ARGV[3]),
	tonumber(ARGV[4])
local cur
local field = what == 'sliceref' or what == 'packdead'
if field then
	cur = redis.call('HGET', what, id)
elseif what == 'totalinodes' or what == 'usedspace' then
	cur = redis.call('GET', what)
else
	return {EINVAL}
end
if tonumber(cur or '0') ~= was then
	return {EAGAIN}
end
if not field then
	redis.call('SET', what, d(new))
elseif new == 0 then
	redis.call('HDEL', what, id)
else
	redis.call('HSET', what, id, d(new))
end
return {0}
