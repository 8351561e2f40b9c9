-- ARGV: dir. Returns {0, the quotas' generation, the chain of dir: its
-- quotas, nearest first}: the chain holds while the generation does
-- (every change of a directory's chain bumps quotagen).
local dir = tonumber(ARGV[1])
local _, err = getdir(dir)
if err then
	return {err}
end
local out = {0, redis.call('GET', 'quotagen') or '0'}
for _, q in ipairs(quota_chain(dir)) do
	out[#out + 1] = d(q)
end
return out
