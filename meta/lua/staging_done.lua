-- ARGV: name ('b<id>_<idx>' or 'p<pack>'): that staged object is in
-- the store now (or never will be). A dead record parked for it goes
-- back to delslices once nothing of its slice or pack is staged.
local name = ARGV[1]
redis.call('HDEL', 'staging', name)
local k = string.match(name, '^b(%d+)_%d+$') or name
local rec = redis.call('HGET', 'stagedead', k)
local ready = rec and true
if rec and k ~= name then
	local _, _, id, size = rec_at(rec, 1)
	ready = not staged_blocks(id, size)
end
if ready then
	redis.call('RPUSH', 'delslices', rec)
	redis.call('HDEL', 'stagedead', k)
end
return {0}
