#!/bin/bash
# t0290-meta-trips.sh - the Redis round trips of the metadata workload of
# issue 35 (bench/metadata.sh), counted by the client's metrics over 200
# files, with the trash on: `touch` of new files 3 a file (the negative
# lookup, the create, touch's utimens; the kernel's GETATTR of the directory
# after each create is answered from the create's reply, and a file's
# setattr no longer ends that), `ls -l` on a fresh mount none a file (the
# readdirplus tells which entries have no xattr: the kernel's getxattr of
# security.selinux of each is answered without Redis), a rename within the
# directory (python's os.rename: one syscall) 2 (the negative lookup of the
# new name, the rename; the GETATTR of the directory from the rename's
# reply), `rm -rf` 1 (the unlink, into
# the trash; the GETATTR from its reply). The builds before had 4, 1, 3 and
# 2. Timeouts of 30 s, so that no name the kernel holds expires meanwhile
# (an expired one costs a lookup more: the bounds would measure the
# machine's speed). What a user sees after these steps: t0291.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || fail "curl is missing: run make deps"

new_volume trips --trash-days 1
M=$TMP/mnt
N=200
mnt() {
	mount_vol "$META" "$M" --metrics 127.0.0.1:0 --attr-timeout 30 --entry-timeout 30
	ADDR=$(getfattr --absolute-names --only-values -n granary.stats "$M" |
		sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p')
	case $ADDR in 127.0.0.1:[1-9]*) ;; *) fail "metrics address '$ADDR'" ;; esac
}
trips() {
	curl -sf --max-time 10 "http://$ADDR/metrics" |
		sed -n 's/^granary_redis_round_trips_total{[^}]*} //p'
}
# per_file STEP MAX A B: the round trips a file between counts A and B
# are at most MAX
per_file() {
	local r
	r=$(echo "scale=2; ($4 - $3) / $N" | bc)
	echo "# $1: $r round trips a file"
	awk -v r="$r" -v m="$2" 'BEGIN { exit !(r <= m) }' ||
		fail "$1: $r round trips a file, more than $2"
}

mnt
mkdir "$M/d"
seq -f 'f%04g' 1 $N >"$TMP/names"
a=$(trips)
(cd "$M/d" && xargs -a "$TMP/names" touch) || fail "touch failed"
b=$(trips)
per_file touch 3.3 "$a" "$b"
check_eq "$(ls "$M/d" | wc -l)" "$N" "files made"
ok "touch: at most 3.3 round trips a file"

umount_vol "$M"
mnt
a=$(trips)
ls -l "$M/d" >"$TMP/ls.out" || fail "ls -l failed"
b=$(trips)
per_file "ls -l" 0.2 "$a" "$b"
check_eq "$(grep -c '^-rw' "$TMP/ls.out")" "$N" "files listed"
ok "ls -l on a fresh mount: at most 0.2 round trips a file"

a=$(trips)
(cd "$M/d" && python3 -c '
import os, sys
for f in open(sys.argv[1]).read().split():
    os.rename(f, "r" + f)' "$TMP/names") || fail "the renames failed"
b=$(trips)
per_file rename 2.3 "$a" "$b"
check_eq "$(find "$M/d" -name 'rf*' | wc -l)" "$N" "files renamed"
ok "rename: at most 2.3 round trips a file"

ls -l "$M/d" >/dev/null
a=$(trips)
rm -rf "$M/d" || fail "rm -rf failed"
b=$(trips)
per_file "rm -rf" 1.3 "$a" "$b"
[ ! -e "$M/d" ] || fail "d is still there"
ok "rm -rf into the trash: at most 1.3 round trips a file"
