-- ARGV: ino, sid ('0': no session, nothing registered).
local ino, sid = tonumber(ARGV[1]), ARGV[2]
local s = redis.call('HGET', ib(ino), iaf(ino))
if not s then
	return {ENOENT}
end
if sid ~= '0' then
	redis.call('HINCRBY', key('o', ino), sid, 1)
	redis.call('SADD', 'so' .. sid, d(ino))
end
return {0, s}
