#!/bin/bash
# t0150-capacity.sh - what a file and the volume count as used: the bytes
# a file holds, not its length (sparse files), as stat, du and df show it;
# and --capacity as the limit it is: ENOSPC past it, nothing lost before.
. "$(dirname "$0")/lib.sh"

# The kernel sends a closed file's RELEASE after close(2) returned: an
# unlink that comes first keeps the file (open, unlinked) and its bytes
# counted until it arrives. Wait up to 5 s for usedspace to reach 0.
used_is_0() { [ "$(rcli GET usedspace)" = 0 ]; }
wait_used_0() { wait_until 5 used_is_0 || true; }

new_volume capacity
M=$TMP/mnt
mount_vol "$META" "$M"

# --- sparse files take no blocks
truncate -s 1G "$M/sparse"
check_eq "$(stat -c %s "$M/sparse")" 1073741824 "size of a sparse file"
check_eq "$(stat -c %b "$M/sparse")" 0 "blocks of a 1 GiB sparse file"
check_eq "$(du -k "$M/sparse" | cut -f1)" 0 "du of a sparse file"
dd if=/dev/urandom of="$M/sparse" bs=1M count=1 seek=512 conv=notrunc \
	status=none
check_eq "$(stat -c %s "$M/sparse")" 1073741824 "size after a write inside"
check_eq "$(stat -c %b "$M/sparse")" 2048 "blocks after 1 MiB written"
check_eq "$(du -k "$M/sparse" | cut -f1)" 1024 "du after 1 MiB written"
head -c 3000000 /dev/urandom >"$M/dense"
check_eq "$(stat -c %b "$M/dense")" 5860 "blocks of a file written whole"
used=$(rcli GET usedspace)
check_eq "$used" $((1048576 + 3000000)) "usedspace: the bytes written"
rm "$M/sparse" "$M/dense"
wait_used_0
check_eq "$(rcli GET usedspace)" 0 "usedspace after the deletes"
ok "st_blocks, du and usedspace count bytes held, not lengths"
umount_vol "$M"
ok "umount"

# --- a volume of 64 MiB
new_volume capped --capacity 64M
C=$TMP/capped
mount_vol "$META" "$C"
check_eq "$(df -B1 --output=size "$C" | tail -1 | tr -d ' ')" 67108864 \
	"df size of a 64 MiB volume"
random_file "$TMP/src" $((100 << 20))
rc=0
dd if="$TMP/src" of="$C/big" bs=1M count=100 2>"$TMP/dd.err" || rc=$?
[ "$rc" != 0 ] || fail "dd of 100 MiB into a 64 MiB volume exited 0"
grep -q "No space left on device" "$TMP/dd.err" ||
	fail "dd did not say 'No space left on device': $(cat "$TMP/dd.err")"
got=$(stat -c %s "$C/big")
[ "$got" -gt 0 ] && [ "$got" -le $((64 << 20)) ] ||
	fail "size after ENOSPC: $got, expected 1..64 MiB"
cmp -n "$got" "$TMP/src" "$C/big" ||
	fail "the $got bytes written before ENOSPC do not read back"
used=$(rcli GET usedspace)
[ "$used" -le $((64 << 20)) ] ||
	fail "usedspace $used past the capacity with one client"
check_eq "$(df -B1 --output=size "$C" | tail -1 | tr -d ' ')" 67108864 \
	"df size of a full volume"
dfused=$(df -B1 --output=used "$C" | tail -1 | tr -d ' ')
[ "$dfused" -ge $((got - 4096)) ] && [ "$dfused" -le $((64 << 20)) ] ||
	fail "df used $dfused, expected about $got"
# a sparse extension is no write: allowed even on a full volume
truncate -s 1G "$C/big"
check_eq "$(rcli GET usedspace)" "$used" "usedspace after truncate up"
expect_errno "No space left on device" \
	dd if=/dev/zero of="$C/more" bs=1M count=1
expect_errno "No space left on device" fallocate -l 1M "$C/more2"
ok "64 MiB capacity: ENOSPC, what was written reads back, df"

rm "$C/big" "$C/more" "$C/more2"
wait_used_0
check_eq "$(rcli GET usedspace)" 0 "usedspace after rm"
check_eq "$(df -B1 --output=used "$C" | tail -1 | tr -d ' ')" 0 "df used after rm"
dd if="$TMP/src" of="$C/again" bs=1M count=32 status=none ||
	fail "writing after the delete failed"
cmp -n $((32 << 20)) "$TMP/src" "$C/again" || fail "rewritten bytes differ"
ok "deleting frees the space at once"
umount_vol "$C"
