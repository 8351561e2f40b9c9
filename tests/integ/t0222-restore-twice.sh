#!/bin/bash
# t0222-restore-twice.sh - a volume restored twice from the same dump
# never hands out the ids the first restore used (issue 32, item 1). The
# first restore's clients write X (its objects stay in the store: gc with
# its default min-age keeps young objects); the same dump is loaded again
# (the first restore was the wrong one, say): its first mount finds the
# store's restore marker naming the other restore and moves its ids to a
# later epoch, so that a reader of a file a --writeback writer has not
# uploaded yet waits for it instead of reading X's object of the same name.
. "$(dirname "$0")/lib.sh"

gsync() { setfattr -n granary.sync -v 1 "$1"; }
restore_mark() {
	local d
	for d in $DATA_DIRS; do
		find "$d" -type f \( -path "*/meta/restore" -o -path "*/meta/restore._S3rver_object" \)
	done | head -1
}

new_volume twice
W=$TMP/w C=$TMP/c
mount_vol "$META" "$W" --backup-meta 0
random_file "$TMP/old" 50000
cp "$TMP/old" "$W/old"
umount_vol "$W"
"$GRANARY" dump -q "$META" "$TMP/d.jsonl" || fail "dump"

# the first restore, used: X written and read
rcli flushdb >/dev/null
"$GRANARY" load -q "$META" "$TMP/d.jsonl" || fail "first load"
rid1=$(rcli HGET setting restore_id)
mount_vol "$META" "$W" --backup-meta 0
mount_vol "$META" "$C" --backup-meta 0
random_file "$TMP/X" 100000
cp "$TMP/X" "$W/X"
cmp "$TMP/X" "$C/X" || fail "c reads X otherwise"
umount_vol "$C"
umount_vol "$W"
m=$(restore_mark)
[ -n "$m" ] || fail "no restore marker in the store after a restored volume's mount"
grep -q "^id=$rid1\$" "$m" || fail "the restore marker does not name restore $rid1: $(cat "$m")"
ns1=$(rcli GET nextslice)
ok "the first restore's mount marked the store with its restore id"

# the same dump again
rcli flushdb >/dev/null
"$GRANARY" load -q "$META" "$TMP/d.jsonl" || fail "second load"
rid2=$(rcli HGET setting restore_id)
[ "$rid2" != "$rid1" ] || fail "two loads got the same restore id"
[ "$(rcli GET nextslice)" -lt "$ns1" ] || fail "the second load is past the first restore's ids already: the test tests nothing"
"$GRANARY" gc -q "$META" --delete >/dev/null 2>&1 || fail "gc"
mount_vol "$META" "$W" --writeback --pack-window 60s --backup-meta 0
[ "$(rcli GET nextslice)" -gt "$ns1" ] ||
	fail "the second restore hands out ids below the first's ($(rcli GET nextslice) <= $ns1)"
grep -q "^id=$rid2\$" "$(restore_mark)" || fail "the marker does not name the second restore"
grep -q "was loaded again after restore $rid1" "$TMP/log-w.log" ||
	fail "the mount did not log the move of its ids"
ok "the second restore's first mount moved its ids past the first restore's"

# the user-visible side: c reads Y, staged on w, not X's object
mount_vol "$META" "$C" --backup-meta 0
random_file "$TMP/Y" 100000
cp "$TMP/Y" "$W/Y"
cat "$C/Y" >"$TMP/Y.c" 2>"$TMP/Y.err" &
reader=$!
sleep 1
gsync "$W"
wait "$reader" || fail "c cannot read Y: $(cat "$TMP/Y.err")"
cmp -s "$TMP/Y" "$TMP/Y.c" ||
	fail "c reads other bytes than Y's$(cmp -s "$TMP/X" "$TMP/Y.c" && echo ": X's, the first restore's object")"
cmp "$TMP/old" "$C/old" || fail "the file of before the dump"
umount_vol "$C"
umount_vol "$W"
# a remount of the second restore finds its own marker: no move
ns2=$(rcli GET nextslice)
: >"$TMP/log-w.log"
mount_vol "$META" "$W" --backup-meta 0
umount_vol "$W"
! grep -q "was loaded again" "$TMP/log-w.log" || fail "a remount moved the ids again"
[ "$(rcli GET nextslice)" -lt $((ns2 + (1 << 40))) ] || fail "a remount moved the ids again"
ok "a reader of a file not uploaded yet gets its bytes; later mounts leave the ids be"
