-- ARGV: ino, max space, max inodes. Creates or changes the quota of
-- directory ino (SCHEMA.md "Quotas"). Returns {0, 1 when it is new}.
local ino, ms, mi = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local a, err = getdir(ino)
if not a then
	return {err}
end
if ino == 1 or ino == trash_ino() or trash_depth(ino, a) ~= 0 then
	return {EINVAL}
end
local rec = struct.pack(QFMT, ms, mi)
local old = redis.call('HGET', 'quota', d(ino))
if old then
	if old ~= rec then
		redis.call('HSET', 'quota', d(ino), rec)
		redis.call('INCR', 'quotagen')
	end
	return {0, 0}
end
-- inside a version or a detached tree: no quota. The chain of the
-- parent is {} there, and also when the volume has no quota yet: walk
-- with a record in place to tell them apart.
redis.call('HSET', 'quota', d(ino), rec)
qany = true
local c = quota_chain(ino)
if #c == 0 then
	redis.call('HDEL', 'quota', d(ino))
	return {EINVAL}
end
-- no directory may end up below more than QNEST quotas: this one's
-- chain, and those of the quotas below it, grow by one
local deepest = #c
for _, q in ipairs(redis.call('HKEYS', 'quota')) do
	local qc = quota_chain(tonumber(q))
	for _, r in ipairs(qc) do
		if r == ino and #qc > deepest then
			deepest = #qc
		end
	end
end
if deepest > QNEST then
	redis.call('HDEL', 'quota', d(ino))
	return {EMLINK}
end
redis.call('HSET', 'quotaused', 's' .. d(ino), 0, 'i' .. d(ino), 0)
redis.call('INCR', 'quotagen')
return {0, 1}
