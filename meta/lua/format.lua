-- ARGV: setting field/value pairs. Refuses a database that holds anything.
if redis.call('EXISTS', 'setting') == 1 then
	return {EEXIST}
end
if redis.call('DBSIZE') > 0 then
	return {ENOTEMPTY}
end
local s, ns = now()
for i = 1, #ARGV - 1, 2 do
	redis.call('HSET', 'setting', ARGV[i], ARGV[i + 1])
end
if redis.call('HGET', 'setting', 'created') == '0' then
	redis.call('HSET', 'setting', 'created', d(s))
end
local root = {ty = DIR, mode = 493, uid = 0, gid = 0, nlink = 2, len = 0,
	par = 1, as = s, an = ns, ms = s, mn = ns, cs = s, cn = ns}
redis.call('HSET', ib(1), iaf(1), attr_pack(root))
redis.call('SET', 'nextinode', 1)
redis.call('SET', 'totalinodes', 1)
redis.call('SET', 'usedspace', 0)
return {0}
