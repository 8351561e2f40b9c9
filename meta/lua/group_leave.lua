-- lib: group
-- ARGV: group, node (decimal), sid. The record of node in group goes if
-- session sid holds it. Returns {0}.
group_drop(ARGV[1], ARGV[2], tonumber(ARGV[3]))
return {0}
