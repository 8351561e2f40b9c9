-- ARGV: pack. A pack rewrite (granary gc --compact) moves every record of
-- pack's live frames to another pack: pack is referenced by nothing
-- afterwards, but a reader that holds an old chunk list still reads it.
-- Its age for gc --min-age starts now (server time), not at its upload:
-- packretired notes when. granary gc removes the member with the pack
-- (meta_pack_forget). Returns {0}.
redis.call('ZADD', 'packretired', now(), ARGV[1])
return {0}
