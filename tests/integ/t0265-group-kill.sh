#!/bin/bash
# t0265-group-kill.sh - a member of a cache group killed (SIGKILL) in the
# middle of an epoch (issue 33): the other members finish their epoch with
# no error and every byte right (the dead member's share comes from the
# store); the killed member remounts on its cache directory (the same node
# id), joins again once its dead session is gone, and gets its share back:
# a new member's epoch is then served by the three without a store GET,
# the rejoined member answering from the cache it kept.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

# the test build: a killed client's session dies 3 s after its last
# heartbeat (not 60)
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_SESSION_TTL=3
group_volume kill
M0=$TMP/m0
mount_vol "$META" "$M0"
mkdir -p "$M0/ds"
for i in $(seq 1 40); do random_file "$M0/ds/f$i" $((600000 + i * 1000)); done
for i in 1 2; do random_file "$M0/ds/b$i" $((9 << 20)); done
(cd "$M0/ds" && md5sum -- *) >"$TMP/sums"
umount_vol "$M0"
OBJECTS=$(count_objects)

for n in 1 2 3; do gmount "$n"; done
for n in 1 2 3; do
	wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
done
# member 3 reads the dataset: each owner fetches its share
epoch "$TMP/m3" ds || fail "member 3 read wrong bytes"
OWN3=$(cached_objects "$TMP/cache-m3")
HELD=$(( $(cached_objects "$TMP/cache-m1") + $(cached_objects "$TMP/cache-m2") + OWN3 ))
check_eq "$HELD" "$OBJECTS" "objects the three members hold"
[ "$OWN3" -ge 1 ] || fail "member 3 owns nothing of $OBJECTS objects"
N3=$(cat "$TMP/cache-m3/.granary-node")
ok "three members hold the $OBJECTS objects, member 3 (node $N3) $OWN3 of them"

# slow_epoch N: member N reads the files one by one, a line each in
# progress-N, every byte checked
slow_epoch() {
	local n=$1 f sum
	shuf "$TMP/sums" | while read -r sum f; do
		[ "$(md5sum <"$TMP/m$n/ds/$f" | cut -d' ' -f1)" = "$sum" ] ||
			{ echo "wrong bytes in $f"; exit 1; }
		echo "$f" >>"$TMP/progress-$n"
		sleep 0.05 # an epoch long enough to be cut in its middle
	done
}
PIDS3=$(mount_pids "$TMP/m3")
[ -n "$PIDS3" ] || fail "no client serves member 3"
slow_epoch 1 >"$TMP/epoch1.out" 2>&1 &
E1=$!
slow_epoch 2 >"$TMP/epoch2.out" 2>&1 &
E2=$!
some_done() { [ "$(cat "$TMP/progress-1" "$TMP/progress-2" 2>/dev/null | wc -l)" -ge 8 ]; }
wait_until 60 some_done || fail "the epochs of members 1 and 2 do not progress"
kill -KILL $PIDS3
done_at_kill=$(cat "$TMP/progress-1" "$TMP/progress-2" | wc -l)
wait "$E1" || fail "member 1's epoch failed after member 3 was killed: $(cat "$TMP/epoch1.out")"
wait "$E2" || fail "member 2's epoch failed after member 3 was killed: $(cat "$TMP/epoch2.out")"
check_eq "$(wc -l <"$TMP/progress-1")" 42 "files member 1 read"
check_eq "$(wc -l <"$TMP/progress-2")" 42 "files member 2 read"
missed=$(( $(gfig 1 peer_errors) + $(gfig 1 peer_skipped) + $(gfig 2 peer_errors) + $(gfig 2 peer_skipped) ))
[ "$missed" -ge 1 ] || [ "$(gfig 1 members)$(gfig 2 members)" = 22 ] ||
	fail "members 1 and 2 never missed member 3 (killed after $done_at_kill of 84 reads)"
ok "member 3 killed after $done_at_kill of 84 reads: members 1 and 2 finished, every byte right ($missed reads went to the store)"

# the remount: the same cache, the same node; it joins once its dead
# session is gone (at once, or when it expires)
fusermount3 -uz "$TMP/m3" 2>/dev/null || true
gmount 3
check_eq "$(cat "$TMP/cache-m3/.granary-node")" "$N3" "member 3's node id after the remount"
A3=$(gaddr 3)
listed() { "$GRANARY" status "$META" | grep -qE "^g +$N3 .* ${A3//./\\.} +1(\.0)? GiB +ok "; }
wait_until 30 listed || fail "member 3 is not back in the group at $A3: $("$GRANARY" status "$META" | grep "^g ")"
for n in 1 2; do
	wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
done
ok "member 3 remounted on its cache, back in the group as node $N3 at $A3"

# a new member reads an epoch: served by the three, member 3 from the
# cache it kept; the store is not asked
mount_vol "$META" "$TMP/m4" --cache-group "$GROUP" --group-take-only
wait_until 15 gmembers 4 4 || fail "member 4 lists $(gfig 4 members) members"
before=$(ggets 1 2 3 4)
[ "$GRANARY_STORAGE" != s3 ] || mark=$(proxy_mark)
served3=$(gfig 3 served)
epoch "$TMP/m4" ds || fail "member 4 read wrong bytes"
check_eq "$(($(ggets 1 2 3 4) - before))" 0 "store GETs of the members for member 4's epoch"
if [ "$GRANARY_STORAGE" = s3 ]; then
	read -r pg _ _ <<<"$(proxy_gets "$mark")"
	check_eq "$pg" 0 "GETs the store served for member 4's epoch"
fi
[ $(( $(gfig 3 served) - served3 )) -ge "$OWN3" ] ||
	fail "member 3 served $(( $(gfig 3 served) - served3 )) requests for its $OWN3 objects"
check_eq "$(gfig 3 served_fetches)" 0 "objects member 3 fetched from the store for others"
ok "member 3 has its share back: it served $(( $(gfig 3 served) - served3 )) requests from its cache, the store was not asked"
