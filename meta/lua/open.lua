-- ARGV: ino, sid ('0': no session, nothing registered).
-- Returns {0, record, the hour directory of the trash that holds it or 0}.
local ino, sid = tonumber(ARGV[1]), ARGV[2]
local s = redis.call('HGET', ib(ino), iaf(ino))
if not s then
	return {ENOENT}
end
if sid ~= '0' then
	redis.call('HINCRBY', key('o', ino), sid, 1)
	redis.call('SADD', 'so' .. sid, d(ino))
end
local p = fpar(ino)
return {0, s, p < 0 and -p or 0}
