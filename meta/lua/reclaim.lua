-- ARGV: budget (chunk lists to drop in this call), cap (dead slices to
-- hand out). Deleted files are worked on from their last chunk down; a
-- file only partly done is put back with the length still to do. The pop
-- is here, not a separate LPOP, so that each dead slice leaves exactly
-- once and a NOSCRIPT retry cannot lose any. A dead frame of a pack only
-- adds to the pack's dead bytes; when they reach its total, the pack
-- itself is handed out as a record of form 5 (u8 5, u64 pack, u64 total).
-- Slices a compaction replaced (delayslices) join delslices once their
-- time has come; those still waiting are no work left (the reclaimer
-- comes back every few seconds anyway).
-- Returns {0, work left (files + dead slices), {records}}.
local budget, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
-- slices a compaction replaced, once their delay is over (compact_chunk)
local ripe = redis.call('ZRANGEBYSCORE', 'delayslices', '-inf', now(),
	'LIMIT', 0, budget)
for _, rec in ipairs(ripe) do
	redis.call('ZREM', 'delayslices', rec)
	redis.call('RPUSH', 'delslices', rec)
end
while budget > 0 do
	local head = redis.call('ZRANGE', 'delfiles', 0, 0, 'WITHSCORES')
	if #head == 0 then
		break
	end
	local m, score = head[1], head[2]
	redis.call('ZREM', 'delfiles', m)
	local ino, len = string.match(m, '^(%d+):(%d+)$')
	if ino then
		ino, len = tonumber(ino), tonumber(len)
		local n = math.ceil(len / CHUNK)
		while n > 0 and budget > 0 do
			n = n - 1
			chunk_drop(ino, n)
			budget = budget - 1
		end
		if n > 0 then
			redis.call('ZADD', 'delfiles', score,
				d(ino) .. ':' .. d(n * CHUNK))
		end
	else
		redis.log(redis.LOG_WARNING,
			'granary: dropped corrupt delfiles member')
	end
	budget = budget - 1
end
local dead = {}
if cap > 0 then
	for _, rec in ipairs(redis.call('LPOP', 'delslices', cap) or {}) do
		local ok, _, _, id, size, _, _, pack, plen = pcall(rec_at, rec, 1)
		if ok and pack then
			pack_dead(pack, plen, dead)
		elseif ok and id ~= 0 and staged_blocks(id, size) then
			-- its blocks are still on their way to the store
			redis.call('HSET', 'stagedead', d(id), rec)
		else
			dead[#dead + 1] = rec
		end
	end
end
return {0, redis.call('ZCARD', 'delfiles') + redis.call('LLEN', 'delslices'),
	dead}
