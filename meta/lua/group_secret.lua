-- ARGV: a fresh secret (64 hex digits, the caller's random bytes).
-- Returns {0, secret}: the volume's group secret (setting group_secret),
-- the one given when there was none yet: of two callers at once, the
-- first's is everyone's. ENODEV when the database holds no volume.
if redis.call('EXISTS', 'setting') == 0 then
	return {ENODEV}
end
redis.call('HSETNX', 'setting', 'group_secret', ARGV[1])
return {0, redis.call('HGET', 'setting', 'group_secret')}
