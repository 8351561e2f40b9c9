#!/bin/bash
# t0240-close-to-open.sh - close-to-open between two mounts of one volume
# with their default cache timeouts: B has read a file, A rewrites it
# (longer, shorter, same length) and closes it, and an open on B right
# after reads exactly what A wrote and sees its length, in every round of
# a loop (the kernel's cached size and pages of the old file must not
# show through: issue 32 saw the new bytes cut to the old length).
. "$(dirname "$0")/lib.sh"

new_volume c2o
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"

# round WHAT SIZE: A rewrites f in place with SIZE random bytes (cp opens
# it with O_TRUNC) and closes it; B, which has read the old f, opens it at
# once: its bytes and its length (fstat after the open) are A's.
round() {
	local what=$1 size=$2
	cat "$B/f" >/dev/null # B holds the old file's size and pages
	random_file "$TMP/new" "$size"
	cp "$TMP/new" "$A/f"
	cat "$B/f" >"$TMP/got"
	cmp -s "$TMP/new" "$TMP/got" ||
		fail "$what: B reads $(wc -c <"$TMP/got") bytes other than the $size A wrote and closed"
	check_eq "$(wc -c <"$B/f")" "$size" "$what: the length B's open sees"
}

random_file "$TMP/new" 50000
cp "$TMP/new" "$A/f"
cmp "$TMP/new" "$B/f" || fail "B reads a new file other than A wrote"
round "grow 50000 -> 80000" 80000
round "shrink 80000 -> 30000" 30000
round "same length 30000" 30000
ok "a file rewritten longer, shorter and as long on A reads whole on B at once"

# a file of several blocks (4 MiB) that grows past a block boundary
round "big file" $((5 << 20))
round "big file grows" $(((9 << 20) + 7))
round "big file shrinks" $(((3 << 20) + 1))
ok "a file of several blocks rewritten longer and shorter reads whole on B"

for i in $(seq 1 20); do
	case $((i % 3)) in
	0) size=$((40000 + i * 997)) ;;			# grows each round
	1) size=$((20000 - i * 311)) ;;			# shorter than the last
	2) size=$((20000 - (i - 1) * 311)) ;;	# as long as the last
	esac
	round "round $i" "$size"
done
ok "20 rounds of rewrites on A, each read at once on B"

# B learned the old attributes from a listing (readdirplus), or holds the
# old file open across the rewrite, or stats it between: an open still
# sees what A closed
random_file "$TMP/new" 50000
cp "$TMP/new" "$A/f"
cat "$B/f" >/dev/null
ls -l "$B" >/dev/null
random_file "$TMP/new" 70000
cp "$TMP/new" "$A/f"
cmp "$TMP/new" "$B/f" || fail "B reads other bytes than A wrote after a listing"
exec 8<"$B/f"
random_file "$TMP/new" 110000
cp "$TMP/new" "$A/f"
cmp "$TMP/new" "$B/f" || fail "B reads other bytes than A wrote while B holds it open"
exec 8<&-
for i in 1 2 3; do
	cat "$B/f" >/dev/null
	random_file "$TMP/new" $((110000 + i * 1000))
	cp "$TMP/new" "$A/f"
	stat "$B/f" >/dev/null
	cmp "$TMP/new" "$B/f" || fail "B reads other bytes than A wrote after a stat ($i)"
done
ok "close-to-open after a listing, with the file held open, after a stat"

# and the other way: B writes, A (which read it) opens at once
random_file "$TMP/new" 60000
cp "$TMP/new" "$B/f"
cat "$A/f" >/dev/null
random_file "$TMP/new" 90000
cp "$TMP/new" "$B/f"
cmp "$TMP/new" "$A/f" || fail "A reads other bytes than B wrote and closed"
ok "B rewrites longer, A reads it whole at once"
umount_vol "$A"
umount_vol "$B"
