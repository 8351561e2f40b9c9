-- ARGV: dir. Returns {0, the chain of dir: its quotas, nearest first}.
local dir = tonumber(ARGV[1])
local _, err = getdir(dir)
if err then
	return {err}
end
local out = {0}
for _, q in ipairs(quota_chain(dir)) do
	out[#out + 1] = d(q)
end
return out
