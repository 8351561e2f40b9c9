#!/bin/bash
# t0269-group-warmup.sh - warmup for a cache group, and what a member that
# joins or leaves moves (issue 33). `granary warmup` on one member fills
# the group: every object lands once, in its owner's cache (this node
# keeps only its share), the store sees each object once, and `warmup
# --check` on any member agrees (all of it in the group, its share on the
# node). A fresh member that joins takes only its share: the others'
# caches do not change, the next epoch fetches from the store exactly the
# objects it now owns (counted), and `--check` shows that share missing
# from the group until then; when it leaves, its share goes back to the
# members that held it, and an epoch asks the store for nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

group_volume warm
M0=$TMP/m0
mount_vol "$META" "$M0"
mkdir -p "$M0/ds"
small_files "$M0/ds" 40
for i in $(seq 1 30); do random_file "$M0/ds/m$i" $((1100000 + i * 999)); done
for i in 1 2; do random_file "$M0/ds/b$i" $((9 << 20)); done
(cd "$M0/ds" && md5sum -- *) >"$TMP/sums"
TOTAL=$(du -b --apparent-size -c "$M0"/ds/* | tail -n 1 | cut -f1)
umount_vol "$M0"
OBJECTS=$(count_objects)

for n in 1 2 3; do gmount "$n"; done
for n in 1 2 3; do
	wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
done
before=$(ggets 1 2 3)
[ "$GRANARY_STORAGE" != s3 ] || mark=$(proxy_mark)
"$GRANARY" warmup "$TMP/m1/ds" >"$TMP/warm.out" 2>"$TMP/warm.err" ||
	fail "warmup: $(cat "$TMP/warm.err")"
grep -q "at their owners in the cache group" "$TMP/warm.out" || fail "warmup said: $(cat "$TMP/warm.out")"
check_eq "$(($(ggets 1 2 3) - before))" "$OBJECTS" "store GETs of the members for the warmup"
if [ "$GRANARY_STORAGE" = s3 ]; then
	read -r pg keys most <<<"$(proxy_gets "$mark")"
	check_eq "$keys/$most/$pg" "$OBJECTS/1/$OBJECTS" "objects/most GETs of one/GETs the store served"
fi
for n in 1 2 3; do cached_keys "$TMP/cache-m$n"; done | sort >"$TMP/held"
check_eq "$(sort -u "$TMP/held" | wc -l)" "$OBJECTS" "objects the group holds after the warmup"
check_eq "$(uniq -d "$TMP/held" | wc -l)" 0 "objects held twice"
H1=$(cached_objects "$TMP/cache-m1")
H2=$(cached_objects "$TMP/cache-m2")
H3=$(cached_objects "$TMP/cache-m3")
[ "$H1" -lt "$OBJECTS" ] && [ "$H2" -ge 1 ] && [ "$H3" -ge 1 ] ||
	fail "the warmup's node kept $H1 of $OBJECTS objects, the others $H2 and $H3"
ok "warmup on member 1: the store sent each of the $OBJECTS objects once, each landed on one member ($H1/$H2/$H3)"

# check_json N: member N's `warmup --check --json` as "bytes cached group"
check_json() {
	"$GRANARY" warmup --check --json "$TMP/m$1/ds" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["bytes"], d["cached_bytes"], d["group_bytes"])'
}
sum=0
for n in 1 2 3; do
	read -r bytes cached group <<<"$(check_json "$n")"
	check_eq "$bytes/$group" "$TOTAL/$TOTAL" "member $n: --check's bytes/in the group"
	[ "$cached" -lt "$TOTAL" ] || fail "member $n: --check says all $TOTAL bytes are on this node"
	sum=$((sum + cached))
done
check_eq "$sum" "$TOTAL" "bytes on the nodes, summed over the members"
"$GRANARY" warmup --check "$TMP/m2/ds" >"$TMP/check.out"
grep -qE "cached on this node \([0-9.]+%\), .* in the cache group \(100\.0%\)" "$TMP/check.out" ||
	fail "warmup --check said: $(cat "$TMP/check.out")"
ok "warmup --check agrees on every member: all in the group, each node its share"

# a fresh member joins: it owns its share, which nobody holds for it
gmount 4
for n in 1 2 3 4; do
	wait_until 15 gmembers "$n" 4 || fail "member $n lists $(gfig "$n" members) members"
done
read -r _ _ group <<<"$(check_json 1)"
moved=$((TOTAL - group))
[ "$moved" -gt 0 ] && [ "$moved" -lt $((TOTAL * 6 / 10)) ] ||
	fail "after member 4 joined, $moved of $TOTAL bytes are not in the group"
before=$(ggets 1 2 3 4)
epoch "$TMP/m4" ds || fail "member 4 read wrong bytes"
H4=$(cached_objects "$TMP/cache-m4")
check_eq "$(($(ggets 1 2 3 4) - before))" "$H4" "store GETs of member 4's epoch (the objects it owns)"
[ "$H4" -ge 1 ] && [ "$H4" -le $((OBJECTS * 6 / 10)) ] || fail "member 4 owns $H4 of $OBJECTS objects"
check_eq "$(cached_objects "$TMP/cache-m1")/$(cached_objects "$TMP/cache-m2")/$(cached_objects "$TMP/cache-m3")" \
	"$H1/$H2/$H3" "objects the first three hold after member 4's epoch"
read -r _ _ group <<<"$(check_json 1)"
check_eq "$group" "$TOTAL" "bytes in the group after member 4's epoch"
ok "member 4 joined and took only its share: $H4 of $OBJECTS objects ($moved of $TOTAL bytes), fetched once; the others' caches unchanged"

# it leaves: its share goes back to where it was, still held there
umount_vol "$TMP/m4"
for n in 1 2 3; do
	wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
done
read -r _ _ group <<<"$(check_json 2)"
check_eq "$group" "$TOTAL" "bytes in the group after member 4 left"
mount_vol "$META" "$TMP/m5" --cache-group "$GROUP" --group-take-only
wait_until 15 gmembers 5 4 || fail "member 5 lists $(gfig 5 members) members"
before=$(ggets 1 2 3 5)
epoch "$TMP/m5" ds || fail "member 5 read wrong bytes"
check_eq "$(($(ggets 1 2 3 5) - before))" 0 "store GETs of an epoch after member 4 left"
ok "member 4 left: its share is back with the members that held it, an epoch asks the store for nothing"
