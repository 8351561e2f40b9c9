-- ARGV: the `crypt` setting expected, its new value. The wrapped volume
-- key replaced (granary key change) only if nobody changed it meanwhile:
-- EBUSY when it holds another record; ENODEV when there is no volume.
if redis.call('EXISTS', 'setting') == 0 then
	return {ENODEV}
end
if (redis.call('HGET', 'setting', 'crypt') or '') ~= ARGV[1] then
	return {EBUSY}
end
redis.call('HSET', 'setting', 'crypt', ARGV[2])
return {0}
