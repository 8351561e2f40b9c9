#!/bin/bash
# t0266-group-corrupt.sh - a member's cache entry corrupted on disk (issue
# 33): another member that reads the block from it finds it bad (its
# checksum), reads the block from the store instead and gets the right
# bytes; the owner is told and drops the bad entry, and a later read
# through the group gets the block right again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

group_volume corrupt
M0=$TMP/m0
mount_vol "$META" "$M0"
dataset "$M0/ds" 24 500000
umount_vol "$M0"

for n in 1 2 3; do gmount "$n"; done
for n in 1 2 3; do
	wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
done
epoch "$TMP/m1" ds || fail "member 1 read wrong bytes"
# an object member 2 holds (owns): spoil bytes in its middle
KEY=$(cached_keys "$TMP/cache-m2" | head -n 1)
[ -n "$KEY" ] || fail "member 2 holds no object"
ENTRY=$(echo "$TMP/cache-m2"/*/"$KEY")
[ -f "$ENTRY" ] || fail "no entry file $ENTRY"
MARK=CORRUPTED-BY-T0266
printf '%s' "$MARK$MARK$MARK" | dd of="$ENTRY" bs=1 seek=200000 conv=notrunc status=none
grep -qF "$MARK" "$ENTRY" || fail "the entry was not spoiled"
bad0=$(gfig 3 bad_from_peers)

# member 3 has read nothing yet: every block comes from its owner
epoch "$TMP/m3" ds || fail "member 3 read wrong bytes of a block member 2 holds spoiled"
[ "$(gfig 3 bad_from_peers)" -gt "$bad0" ] ||
	fail "member 3 counted no bad copy from a peer (peer hits $(gfig 3 peer_hits))"
ok "member 3 read every byte right; the spoiled copy of $KEY from member 2 was found bad"

spoiled_gone() { ! grep -rqF "$MARK" "$TMP/cache-m2"; }
wait_until 15 spoiled_gone || fail "member 2 still holds the spoiled entry of $KEY"
ok "member 2 dropped the bad entry"

# a new member reads again: right bytes, nothing spoiled anywhere
mount_vol "$META" "$TMP/m4" --cache-group "$GROUP" --group-take-only
wait_until 15 gmembers 4 4 || fail "member 4 lists $(gfig 4 members) members"
epoch "$TMP/m4" ds || fail "member 4 read wrong bytes"
check_eq "$(gfig 4 bad_from_peers)" 0 "bad copies member 4 got"
for n in 1 2 3; do
	! grep -rqF "$MARK" "$TMP/cache-m$n" || fail "a spoiled entry in member $n's cache"
done
ok "a later read through the group gets the block right; no spoiled entry is left"
