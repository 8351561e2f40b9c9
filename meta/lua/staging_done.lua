-- ARGV: name ('b<id>_<idx>' or 'p<pack>'): that staged object is in
-- the store now (or never will be). A dead record parked for it goes
-- back to delslices once nothing of its slice or pack is staged.
staging_release(ARGV[1])
return {0}
