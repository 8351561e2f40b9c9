#!/bin/bash
# t0250-mounted-restore.sh - a client left mounted across a `granary load`
# (issue 32): the docs say to unmount every client before a restore, but
# one that was not must not go on with its state of before (node table,
# kernel and disk caches, ids taken before the restore) in the restored
# volume. Within a few heartbeats of the load it logs once, as an error,
# what happened and what to do, and every operation on it fails with EIO:
# reads of a file it has cached (the kernel's pages too, through a
# descriptor opened before), listings, stats, creates and writes; nothing
# of it reaches the restored volume, and a fresh mount reads the restored
# volume right. Before the fix the client registered its session again
# in the restored database and served its old caches.
. "$(dirname "$0")/lib.sh"

# every client takes a 2 s session TTL: a heartbeat every 0.5 s
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_SESSION_TTL=2

new_volume rs
M=$TMP/m N=$TMP/n
# long attribute timeouts: the kernel would serve its pages and
# attributes without asking the client
mount_vol "$META" "$M" --backup-meta 0 --attr-timeout 3600 --entry-timeout 3600
random_file "$TMP/kept" 300000
cp "$TMP/kept" "$M/kept"
mkdir "$M/dir"
echo inside >"$M/dir/file"
cmp "$TMP/kept" "$M/kept" || fail "kept reads otherwise before the dump"
"$GRANARY" dump -q "$META" "$TMP/d.jsonl" || fail "dump"

# after the dump: what the restore loses; and descriptors kept open, to
# read a file whose pages the kernel holds, and to write
random_file "$TMP/lost" 50000
cp "$TMP/lost" "$M/lost"
exec 7<"$M/kept"
head -c 1000 <&7 >/dev/null || fail "read through the kept descriptor"
exec 8>>"$M/lost"
cmp "$TMP/kept" "$M/kept" || fail "kept reads otherwise before the load"

# the restore, as operations.md says, but with the client still mounted
rcli flushdb >/dev/null
"$GRANARY" load -q "$META" "$TMP/d.jsonl" >"$TMP/load.out" 2>&1 ||
	fail "load: $(cat "$TMP/load.out")"
rid=$(rcli HGET setting restore_id)
[ -n "$rid" ] || fail "the load set no restore_id"

LINE="volume 'rs' was restored from a dump while mounted here; every operation now fails with EIO: unmount and mount again"
LOG=$TMP/log-m.log
wait_until 30 grep -qF "$LINE" "$LOG" ||
	fail "the client did not say it was restored from under it within 30 s (TTL 2 s)"
expect_errno "Input/output error" cat "$M/kept"
expect_errno "Input/output error" stat "$M/dir/file"
expect_errno "Input/output error" ls "$M/dir"
expect_errno "Input/output error" ls "$M"
expect_errno "Input/output error" bash -c "echo new >'$M/new'"
expect_errno "Input/output error" mkdir "$M/newdir"
# what the kernel holds: the attributes of kept, and its pages read
# through the descriptor opened before (dropped by the client once it
# stopped, right after the line); pread, so that no close is in the way
expect_errno "Input/output error" stat "$M/kept"
fd_read_fails() {
	! python3 -c 'import os; os.pread(7, 1000, 5000)' 2>"$TMP/pread.err" &&
		grep -q "Input/output error" "$TMP/pread.err"
}
wait_until 10 fd_read_fails ||
	fail "a read through a descriptor opened before the restore does not fail with EIO: $(cat "$TMP/pread.err")"
{ exec 7<&-; } 2>/dev/null # its close fails too: EIO
# a descriptor open for writing: its writes
expect_errno "Input/output error" bash -c 'echo more >&8'
{ exec 8>&-; } 2>/dev/null
ok "the client left mounted says it was restored, once; every operation on it fails with EIO, cached reads included"

check_eq "$(grep -cF "$LINE" "$LOG")" 1 "times the client said it"
check_eq "$(rcli ZCARD sessions)" 0 "sessions in the restored volume (the old client's registered again?)"

# a fresh mount reads the restored volume: what was dumped, not what
# came after, and nothing of the old client
mount_vol "$META" "$N" --backup-meta 0
cmp "$TMP/kept" "$N/kept" || fail "the fresh mount reads kept otherwise"
check_eq "$(cat "$N/dir/file")" inside "dir/file on the fresh mount"
[ ! -e "$N/lost" ] || fail "a file written after the dump came back"
[ ! -e "$N/new" ] || fail "the old client created a file in the restored volume"
[ ! -e "$N/newdir" ] || fail "the old client made a directory in the restored volume"
ok "a fresh mount reads the restored volume, without the old client's changes"

umount_vol "$M"
umount_vol "$N"
check_eq "$(rcli ZCARD sessions)" 0 "sessions left after both unmounts"
"$GRANARY" fsck -q "$META" >"$TMP/fsck.out" 2>&1 ||
	fail "fsck after the drill: $(cat "$TMP/fsck.out")"
ok "the old client unmounts; the restored volume is clean"
