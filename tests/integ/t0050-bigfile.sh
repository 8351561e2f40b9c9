#!/bin/bash
# storage: file
# t0050-bigfile.sh - a sparse file past 4 GiB: data at 5 GiB + 123 reads
# back, holes read as zeros, truncate down then up leaves zeros, and the
# store holds only the written bytes.
. "$(dirname "$0")/lib.sh"

new_volume big
M=$TMP/mnt
mount_vol "$META" "$M"
G=$((1024 * 1024 * 1024))
MB=$((1024 * 1024))
off=$((5 * G + 123))
f=$M/sparse

# read_at FILE OFFSET LEN: LEN bytes from OFFSET on stdout
read_at() {
	dd if="$1" bs=64K skip="$2" count="$3" iflag=skip_bytes,count_bytes status=none
}

random_file "$TMP/chunk" $MB
random_file "$TMP/edge" 20
head -c $MB /dev/zero >"$TMP/zeros"
dd if="$TMP/chunk" of="$f" bs=$MB seek=$off oflag=seek_bytes conv=notrunc status=none
check_eq "$(stat -c %s "$f")" $((off + MB)) "size after a write at 5 GiB + 123"
# 20 bytes across the 4 GiB line
dd if="$TMP/edge" of="$f" bs=20 seek=$((4 * G - 10)) oflag=seek_bytes conv=notrunc status=none
check_eq "$(stat -c %s "$f")" $((off + MB)) "size after a write inside the file"
read_at "$f" $off $MB | cmp - "$TMP/chunk" || fail "data at 5 GiB + 123 differs"
read_at "$f" $((4 * G - 10)) 20 | cmp - "$TMP/edge" || fail "data across 4 GiB differs"
read_at "$f" $G $MB | cmp - "$TMP/zeros" || fail "a hole at 1 GiB does not read as zeros"
read_at "$f" $((off - 1000)) 1000 | cmp - <(head -c 1000 /dev/zero) ||
	fail "the hole just before the data does not read as zeros"
check_eq "$(read_at "$f" $((off + MB)) 100 | wc -c)" 0 "bytes read at EOF"
ok "1 MiB at 5 GiB + 123, holes read as zeros"

used=$(du -sk $DATA_DIRS | awk '{ s += $1 } END { print s }')
[ "$used" -lt 8192 ] || fail "the store uses $used KiB for 1 MiB + 20 bytes of data"
ok "store usage ${used} KiB"

# the same after a fresh client
umount_vol "$M"
mount_vol "$META" "$M"
check_eq "$(stat -c %s "$f")" $((off + MB)) "size after remount"
read_at "$f" $off $MB | cmp - "$TMP/chunk" || fail "data at 5 GiB + 123 differs after remount"
ok "same after remount"

truncate -s $((4 * G + 1)) "$f"
check_eq "$(stat -c %s "$f")" $((4 * G + 1)) "size after truncate to 4 GiB + 1"
read_at "$f" $((4 * G - 10)) 11 | cmp - <(head -c 11 "$TMP/edge") ||
	fail "the bytes kept by truncate to 4 GiB + 1 differ"
truncate -s $((6 * G)) "$f"
check_eq "$(stat -c %s "$f")" $((6 * G)) "size after truncate up to 6 GiB"
read_at "$f" $((4 * G - 10)) 20 | cmp - <(head -c 11 "$TMP/edge"; head -c 9 /dev/zero) ||
	fail "bytes past 4 GiB + 1 are not zeros after truncate down and up"
read_at "$f" $off $MB | cmp - "$TMP/zeros" ||
	fail "old data at 5 GiB + 123 shows again after truncate down and up"
ok "truncate down to 4 GiB + 1 and up: zeros where data was"
umount_vol "$M"
mount_vol "$META" "$M"
read_at "$f" $off $MB | cmp - "$TMP/zeros" ||
	fail "old data at 5 GiB + 123 shows again after remount"
read_at "$f" $((4 * G - 10)) 11 | cmp - <(head -c 11 "$TMP/edge") ||
	fail "the kept bytes differ after remount"
ok "same after remount"
umount_vol "$M"
