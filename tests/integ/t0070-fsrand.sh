#!/bin/bash
# t0070-fsrand.sh - the randomized exerciser (fsrand) against a shadow copy
# on local disk, then every file compared again through a fresh client.
# GRANARY_SEED overrides the fixed seed; the seed is printed for replay.
. "$(dirname "$0")/lib.sh"

[ -x "$FSRAND" ] || fail "no fsrand at '$FSRAND' (make all)"
seed=${GRANARY_SEED:-20261130}
if [ "$GRANARY_STORAGE" = s3 ]; then
	args=(-n 2500 -f 4 -m 6M) # s3rver is slow
	small=(-n 2000 -f 24 -m 200K)
else
	args=(-n 9000 -f 4 -m 12M)
	small=(-n 3000 -f 24 -m 200K)
fi
new_volume rand
M=$TMP/mnt SH=$TMP/shadow
mkdir -p "$SH"
mount_vol "$META" "$M"
mkdir "$M/r"
"$FSRAND" -s "$seed" "${args[@]}" "$M/r" "$SH" ||
	fail "fsrand found a difference (replay: $FSRAND -s $seed ${args[*]} DIR SHADOW)"
ok "fsrand -s $seed ${args[*]}"
# many small files: partial blocks, short files, frequent reopen
mkdir "$M/small" "$TMP/shadow-small"
"$FSRAND" -s $((seed + 1)) "${small[@]}" "$M/small" "$TMP/shadow-small" ||
	fail "fsrand found a difference (replay: $FSRAND -s $((seed + 1)) ${small[*]} DIR SHADOW)"
ok "fsrand -s $((seed + 1)) ${small[*]}"
umount_vol "$M"

mount_vol "$META" "$M"
check_eq "$(ls "$M/r" | tr '\n' ' ')" "$(ls "$SH" | tr '\n' ' ')" "files after remount"
for f in "$SH"/*; do
	n=$(basename "$f")
	check_eq "$(stat -c %s "$M/r/$n")" "$(stat -c %s "$f")" "size of $n after remount"
	cmp "$f" "$M/r/$n" || fail "$n differs from its shadow after remount (seed $seed)"
done
for f in "$TMP/shadow-small"/*; do
	cmp "$f" "$M/small/$(basename "$f")" ||
		fail "small/$(basename "$f") differs from its shadow after remount (seed $((seed + 1)))"
done
ok "every file equal to its shadow after remount"
umount_vol "$M"
