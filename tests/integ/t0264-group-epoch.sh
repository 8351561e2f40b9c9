#!/bin/bash
# t0264-group-epoch.sh - a cold shuffled epoch read by every member of a
# cache group at once (issue 33): four mounts of one volume, each with
# its own cache directory and loopback address, read every file of a
# dataset (small files in packs, files of one block, files of several
# blocks) in their own shuffled order; every byte reads back right, the
# store sees each object fetched once for the whole group (counted at the
# store: on s3 by a proxy's log in front of s3rver, on file storage as the
# sum of the members' store GETs), and each object is kept by one member.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

group_volume epoch
M0=$TMP/m0
mount_vol "$META" "$M0"
mkdir -p "$M0/ds"
small_files "$M0/ds" 60
for i in $(seq 1 20); do random_file "$M0/ds/m$i" $((1200000 + i * 1000)); done
for i in 1 2; do random_file "$M0/ds/b$i" $((9 << 20)); done
(cd "$M0/ds" && md5sum -- *) >"$TMP/sums"
umount_vol "$M0"
OBJECTS=$(count_objects)
[ "$OBJECTS" -ge 20 ] || fail "the dataset is $OBJECTS objects"

for n in 1 2 3 4; do gmount "$n"; done
for n in 1 2 3 4; do
	wait_until 15 gmembers "$n" 4 || fail "member $n lists $(gfig "$n" members) members"
done
before=$(ggets 1 2 3 4)
[ "$GRANARY_STORAGE" != s3 ] || mark=$(proxy_mark)

pids=""
for n in 1 2 3 4; do
	epoch "$TMP/m$n" ds >"$TMP/epoch$n.out" 2>&1 &
	pids="$pids $!"
done
n=0
for p in $pids; do
	n=$((n + 1))
	wait "$p" || fail "member $n read wrong bytes: $(head -5 "$TMP/epoch$n.out")"
done
ok "four members read a cold shuffled epoch at once, every byte right ($OBJECTS objects)"

gets=$(($(ggets 1 2 3 4) - before))
info="peer hits $(gfig 1 peer_hits)/$(gfig 2 peer_hits)/$(gfig 3 peer_hits)/$(gfig 4 peer_hits), errors $(gfig 1 peer_errors)/$(gfig 2 peer_errors)/$(gfig 3 peer_errors)/$(gfig 4 peer_errors), skipped $(gfig 1 peer_skipped)/$(gfig 2 peer_skipped)/$(gfig 3 peer_skipped)/$(gfig 4 peer_skipped)"
check_eq "$gets" "$OBJECTS" "store GETs of the four members for the epoch ($info)"
if [ "$GRANARY_STORAGE" = s3 ]; then
	read -r pg keys most <<<"$(proxy_gets "$mark")"
	check_eq "$keys" "$OBJECTS" "objects the store served ($info)"
	check_eq "$most" 1 "GETs of the most asked object at the store ($info)"
	check_eq "$pg" "$OBJECTS" "GETs the store served"
	ok "the store (its proxy's log) served each of the $OBJECTS objects once"
else
	ok "the members' store GETs sum to $gets: each of the $OBJECTS objects once"
fi
for n in 1 2 3 4; do
	[ "$(gfig "$n" peer_hits)" -ge 1 ] || fail "member $n read nothing from a peer ($info)"
	[ "$(gfig "$n" served)" -ge 1 ] || fail "member $n served nothing"
done

# each object on one member: the caches together hold each once
for n in 1 2 3 4; do cached_keys "$TMP/cache-m$n"; done | sort >"$TMP/held"
check_eq "$(sort -u "$TMP/held" | wc -l)" "$OBJECTS" "objects held by the group"
check_eq "$(uniq -d "$TMP/held" | wc -l)" 0 "objects held by two members"
ok "each object is held by exactly one member ($(for n in 1 2 3 4; do printf '%s ' "$(cached_objects "$TMP/cache-m$n")"; done)each)"

# a second epoch: nothing from the store
before=$(ggets 1 2 3 4)
for n in 1 2 3 4; do epoch "$TMP/m$n" ds || fail "member $n, second epoch: wrong bytes"; done
check_eq "$(($(ggets 1 2 3 4) - before))" 0 "store GETs of a second epoch"
ok "a second epoch on every member reads nothing from the store"
