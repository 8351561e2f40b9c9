-- ARGV: setting field, value. A setting of a volume that exists changed
-- (granary config); ENODEV when the database holds no volume.
if redis.call('EXISTS', 'setting') == 0 then
	return {ENODEV}
end
redis.call('HSET', 'setting', ARGV[1], ARGV[2])
return {0}
