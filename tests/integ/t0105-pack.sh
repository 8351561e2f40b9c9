#!/bin/bash
# t0105-pack.sh - small files packed many to one object: files closed
# together share one PUT, read back on another client, survive deletes,
# overwrites and truncates of their neighbours; a pack's dead bytes are
# counted and a pack whose files are all gone is deleted; --no-pack.
. "$(dirname "$0")/lib.sh"
[ -x "$CLOSEALL" ] || fail "no closeall at '$CLOSEALL' (make all)"


new_volume pack
A=$TMP/a B=$TMP/b
# a long window: the 16 closes below must meet in one pack even on a
# loaded machine (they seal it as soon as all 16 are in)
mount_vol "$META" "$A" --attr-timeout 0.2 --entry-timeout 0.2 --pack-window 3s
mount_vol "$META" "$B" --attr-timeout 0.2 --entry-timeout 0.2
mkdir -p "$TMP/src"
srcs=()
for i in $(seq 1 16); do
	random_file "$TMP/src/f$i" $((1000 + i * 9973))
	srcs+=("$TMP/src/f$i")
done
mkdir "$A/ds"
p0=$(stat_of "$A" store puts)
"$CLOSEALL" "$A/ds" "${srcs[@]}" || fail "writing 16 files at once failed"
p1=$(stat_of "$A" store puts)
check_eq "$((p1 - p0))" 1 "PUTs for 16 small files closed at once"
check_eq "$(count_objects blocks)" 0 "block objects for small files"
check_eq "$(count_objects packs)" 1 "pack objects"
check_eq "$(rcli HLEN packs)" 1 "packs recorded in the metadata"
ok "16 files closed at once: 1 PUT, 1 pack"

sleep 0.5
diff -r "$TMP/src" "$B/ds" || fail "B reads the packed files differently"
ok "another client reads every packed file"

# neighbours: delete, overwrite whole, overwrite a part, truncate, append
# (on B, mirrored in the shadow copy)
rm "$B/ds/f1" "$TMP/src/f1"
head -c 5000 /dev/urandom >"$TMP/new2"
cp "$TMP/new2" "$B/ds/f2"
cp "$TMP/new2" "$TMP/src/f2"
printf 'patched' | dd of="$B/ds/f3" bs=1 seek=100 conv=notrunc status=none
printf 'patched' | dd of="$TMP/src/f3" bs=1 seek=100 conv=notrunc status=none
truncate -s 100 "$B/ds/f4" "$TMP/src/f4"
printf 'tail' >>"$B/ds/f5"
printf 'tail' >>"$TMP/src/f5"
sleep 0.5
diff -r "$TMP/src" "$A/ds" || fail "A after B's changes differs"
umount_vol "$A"
mount_vol "$META" "$A" --cache-size 0
diff -r "$TMP/src" "$A/ds" || fail "A after a remount without cache differs"
ok "deletes, overwrites, truncates of packed files leave their neighbours intact"

pack=$(rcli HKEYS packs | head -n 1)
total=$(rcli HGET packs "$pack")
dead_ok() {
	local d
	d=$(rcli HGET packdead "$pack")
	[ -n "$d" ] && [ "$d" -gt 0 ] && [ "$d" -lt "$total" ]
}
wait_until 30 dead_ok ||
	fail "dead bytes of pack $pack: '$(rcli HGET packdead "$pack")' of $total"
ok "the pack's dead bytes are counted ($(rcli HGET packdead "$pack") of $total)"

rm -r "$B/ds"
no_packs() { [ "$(rcli HLEN packs)" = 0 ] && [ "$(count_objects)" = 0 ]; }
wait_until 30 no_packs ||
	fail "after deleting every file: $(rcli HLEN packs) packs recorded, $(count_objects) objects left"
ok "a pack whose files are all gone is deleted"

umount_vol "$B"
mount_vol "$META" "$B" --no-pack
random_file "$TMP/small" 3000
cp "$TMP/small" "$B/small"
check_eq "$(count_objects packs)" 0 "pack objects with --no-pack"
check_eq "$(count_objects blocks)" 1 "block objects with --no-pack"
cmp "$TMP/small" "$A/small" || fail "a --no-pack file reads back differently"
ok "--no-pack stores small files as blocks"
umount_vol "$A"
umount_vol "$B"
