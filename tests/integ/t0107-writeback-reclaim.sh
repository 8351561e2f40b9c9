#!/bin/bash
# t0107-writeback-reclaim.sh - files written with --writeback on one node
# and deleted on another while their blocks and pack are still staged on
# the first: the other node's reclamation waits until they are in the
# store, then deletes them, so that no object is left behind.
. "$(dirname "$0")/lib.sh"

new_volume wbr
A=$TMP/a B=$TMP/b
# every block upload of A held back 8 s, its pack until the sync: the
# deletes on B come first
GRANARY=$GRANARY_HOOKS GRANARY_TEST_STAGE_DELAY_MS=8000 mount_vol "$META" "$A" --writeback --pack-window 60s
mount_vol "$META" "$B" --attr-timeout 0 --entry-timeout 0
mkdir -p "$A/d"
random_file "$TMP/big" $((10 * 1024 * 1024 + 5))
dd if="$TMP/big" of="$A/d/big" bs=1M conv=fsync status=none || fail "writing big"
for i in $(seq 1 8); do
	random_file "$TMP/s$i" $((3000 + i * 1001))
	dd if="$TMP/s$i" of="$A/d/s$i" conv=fsync status=none || fail "writing s$i"
done
[ "$(stat_of "$A" blocks staged)" -ge 1 ] || fail "no block staged on A"
check_eq "$(count_objects blocks)" 0 "blocks in the store before the deletes"
cmp "$TMP/big" "$A/d/big" || fail "A reads its staged big file differently"
check_eq "$(ls "$B/d" | wc -l)" 9 "files B sees"
ok "a 10 MiB file and 8 small ones staged on A, listed on B"

# B deletes them all at once; its reclaimer runs every 2 s
rm -r "$B/d" || fail "rm on B"
kept_back() { [ "$(rcli HLEN stagedead)" -ge 1 ]; }
wait_until 10 kept_back ||
	fail "no dead record waits for A's uploads (stagedead: $(rcli HLEN stagedead), staging: $(rcli HLEN staging))"
ok "B's reclamation keeps the dead slice back while A has it staged"

setfattr -n granary.sync -v 1 "$A" || fail "granary.sync on A"
check_eq "$(rcli HLEN staging)" 0 "objects still named as staged after the sync"
no_objects() { [ "$(count_objects)" = 0 ] && [ "$(rcli HLEN stagedead)" = 0 ]; }
wait_until 20 no_objects ||
	fail "after the uploads and reclamation: $(count_objects blocks) blocks, $(count_objects packs) packs left in the store, $(rcli HLEN stagedead) records waiting"
ok "once A uploaded them, the deleted files' objects are gone from the store"

# the same with A's mount going away before the uploads: its next mount
# uploads what it staged, then the objects go
mkdir -p "$A/e"
dd if="$TMP/big" of="$A/e/big" bs=1M conv=fsync status=none || fail "writing big again"
rm "$B/e/big" || fail "rm on B"
sleep 3
umount_vol "$A"
GRANARY=$GRANARY_HOOKS GRANARY_TEST_STAGE_DELAY_MS=0 mount_vol "$META" "$A" --writeback
wait_until 20 no_objects ||
	fail "after the remount of A: $(count_objects blocks) blocks left in the store"
ok "a deleted file staged across an unmount of its writer leaves nothing"
umount_vol "$A"
umount_vol "$B"
