#!/bin/bash
# t0151-capacity-clients.sh - --capacity with two clients streaming at
# once: each sees the bytes the other accepted and has not committed (the
# `sessionpending` hash), so the volume ends within the documented bound
# (docs/operations.md, "Capacity"), not one client's worth past it.
. "$(dirname "$0")/lib.sh"

CAP=$((64 << 20))
# the bound for two clients: one step of the other client, the capacity
# divided by 64 but at least 4 MiB (SPACE_STEP_MIN in fs/space.h)
STEP=$((4 << 20))
new_volume pair --capacity 64M
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"
random_file "$TMP/src" $((100 << 20))

# both write 100 MiB at once and keep the file open until refused
dd if="$TMP/src" of="$A/from-a" bs=1M count=100 2>"$TMP/dd-a.err" &
pa=$!
dd if="$TMP/src" of="$B/from-b" bs=1M count=100 2>"$TMP/dd-b.err" &
pb=$!
bg_track "$pa $pb"
ra=0 rb=0
wait $pa || ra=$?
wait $pb || rb=$?
BG_PIDS=""
[ "$ra" != 0 ] || fail "dd on A wrote 100 MiB into a 64 MiB volume"
[ "$rb" != 0 ] || fail "dd on B wrote 100 MiB into a 64 MiB volume"
grep -q "No space left on device" "$TMP/dd-a.err" ||
	fail "dd on A did not say 'No space left on device': $(cat "$TMP/dd-a.err")"
grep -q "No space left on device" "$TMP/dd-b.err" ||
	fail "dd on B did not say 'No space left on device': $(cat "$TMP/dd-b.err")"
used=$(rcli GET usedspace)
sa=$(stat -c %s "$A/from-a") sb=$(stat -c %s "$B/from-b")
echo "  # usedspace $used (A wrote $sa, B wrote $sb) of $CAP"
[ "$used" -le $((CAP + STEP)) ] ||
	fail "usedspace $used past the capacity $CAP by more than one step ($STEP)"
check_eq "$used" $((sa + sb)) "usedspace: the bytes of both files"
cmp -n "$sa" "$TMP/src" "$A/from-a" || fail "A's bytes do not read back"
cmp -n "$sb" "$TMP/src" "$B/from-b" || fail "B's bytes do not read back"
ok "two clients streaming at once stop within one step of the capacity"

# nothing stays published once the writes are over (closed: committed)
none_pending() { [ "$(rcli HLEN sessionpending)" = 0 ]; }
wait_until 5 none_pending ||
	fail "pending bytes still published: $(rcli HGETALL sessionpending)"
ok "no pending bytes left published after the closes"

# freed on A, usable on B once its reading is a second old
rm "$A/from-a"
sleep 1.2
dd if="$TMP/src" of="$B/more" bs=1M count=8 status=none ||
	fail "B cannot write a second after A freed space"
ok "space freed by one client is usable by the other a second later"

umount_vol "$A"
umount_vol "$B"
check_eq "$(rcli EXISTS sessionpending)" 0 "sessionpending after the unmounts"
ok "umount"
