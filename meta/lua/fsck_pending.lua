-- ARGV: was. pendingspace, if it is still was, becomes the sum of the
-- sessionpending fields, which it counts (space_usage and the cleanup of
-- a session change both in one script). EAGAIN when it moved. Returns
-- {0}.
local EAGAIN = @EAGAIN@
if tonumber(redis.call('GET', 'pendingspace') or '0') ~= tonumber(ARGV[1]) then
	return {EAGAIN}
end
local sum = 0
for _, v in ipairs(redis.call('HVALS', 'sessionpending')) do
	sum = sum + (tonumber(v) or 0)
end
redis.call('SET', 'pendingspace', d(sum))
return {0}
