#!/bin/bash
# t0246-gc-delayed.sh - the slices a client's compactions replaced wait an
# hour for readers that hold the old list (delayslices); on a volume that
# nobody mounts afterwards, `granary gc --delete` reclaims them: with the
# default --min-age they still wait (the hour is not over), with
# --min-age 0 and no client mounted they go at once. Their objects leave
# the store, the file reads back byte-exact, fsck --objects is clean.
. "$(dirname "$0")/lib.sh"

new_volume dl
A=$TMP/a
mount_vol "$META" "$A"
: >"$A/log"
: >"$TMP/shadow"
for i in $(seq 1 400); do
	line="step $i loss 0.$RANDOM tokens $((i * 4096))"
	echo "$line" >>"$A/log"
	echo "$line" >>"$TMP/shadow"
done
compacted() { [ "$(stat_of "$A" compaction compacted)" -ge 2 ]; }
wait_until 20 compacted || fail "no compaction after 400 appends: $(stat_of "$A" compaction compacted)"
umount_vol "$A"
delayed=$(rcli zcard delayslices)
[ "$delayed" -ge 64 ] || fail "only $delayed slices wait in delayslices"
before=$(count_objects)

# the hour is not over: the default --min-age leaves them
"$GRANARY" gc "$META" --delete --json -q >"$TMP/gc1.json" 2>&1 || fail "gc --delete: $(cat "$TMP/gc1.json")"
check_eq "$(jq .delayed "$TMP/gc1.json")" "$delayed" "slices left waiting by gc --delete"
check_eq "$(count_objects)" "$before" "objects after gc --delete with the default --min-age"
ok "gc --delete leaves the $delayed replaced slices their hour"

# --min-age 0, nobody mounted: they go
"$GRANARY" gc "$META" --delete --min-age 0 --json -q >"$TMP/gc2.json" 2>&1 ||
	fail "gc --delete --min-age 0: $(cat "$TMP/gc2.json")"
check_eq "$(jq .delayed "$TMP/gc2.json")" 0 "slices left waiting"
check_eq "$(rcli zcard delayslices)" 0 "delayslices after gc"
[ "$(jq .reclaimed "$TMP/gc2.json")" -ge "$delayed" ] ||
	fail "gc reclaimed $(jq .reclaimed "$TMP/gc2.json") of $delayed: $(cat "$TMP/gc2.json")"
after=$(count_objects)
[ "$after" -lt "$before" ] || fail "objects: $before before gc, $after after"
[ "$after" -le $((before - delayed / 2)) ] ||
	fail "objects: $before before gc, $after after, with $delayed slices reclaimed"
check_eq "$(jq .live "$TMP/gc2.json")" "$after" "live objects after gc"
check_eq "$(jq .leaked "$TMP/gc2.json")" 0 "objects leaked"
"$GRANARY" fsck "$META" --objects -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --objects after gc: $(cat "$TMP/fsck.out")"
mount_vol "$META" "$A"
cmp "$TMP/shadow" "$A/log" || fail "the log reads back wrong after gc"
umount_vol "$A"
ok "gc --delete --min-age 0 on an unmounted volume reclaims them: $before objects to $after; the log reads back, fsck clean"
