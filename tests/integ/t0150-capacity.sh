#!/bin/bash
# t0150-capacity.sh - what a file and the volume count as used: the bytes
# a file holds, not its length (sparse files), as stat, du and df show it.
. "$(dirname "$0")/lib.sh"

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
check_eq "$(rcli GET usedspace)" 0 "usedspace after the deletes"
ok "st_blocks, du and usedspace count bytes held, not lengths"
umount_vol "$M"
ok "umount"
