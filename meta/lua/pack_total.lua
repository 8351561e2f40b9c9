-- ARGV: pack, total. Returns {0, 1 if the pack is all dead already}.
local pack, total = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('HSET', 'packs', d(pack), d(total))
return {0, pack_dead(pack, 0, {}) and 1 or 0}
