#!/bin/bash
# t0172-backup.sh - the clients' automatic metadata backups and the
# disaster drill: two clients mounted with a short --backup-meta, exactly
# one writes each backup (status names it), old ones are pruned to
# --backup-keep; files written, a backup waited for, more files written
# after it; Redis loses the volume (FLUSHDB); `granary load --from-store`
# builds it back from the newest backup; the mount shows every file
# written before the backup byte-exact, fsck is clean, and gc finds the
# objects of the files written after it as leaked. Bad input gets a clear
# message and exit 1 or 2; --backup-meta 0 writes none.
. "$(dirname "$0")/lib.sh"

# backup_field F: a field of status --json's meta_backup
backup_field() {
	"$GRANARY" status --json "$META" 2>/dev/null | jq -r ".meta_backup.$1"
}
# backups_in_store: the complete backups (their manifests) in the store
backups_in_store() {
	local d n=0
	for d in $DATA_DIRS; do
		[ -d "$d/meta/backups" ] || continue
		n=$((n + $(find "$d/meta/backups" -type f -name 'done*' \
			! -name '*._S3rver_metadata.json' ! -name '*.md5' | wc -l)))
	done
	echo "$n"
}

new_volume backup
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --backup-meta 2s --backup-keep 2
mount_vol "$META" "$B" --backup-meta 2s --backup-keep 2

mkdir -p "$A/ds/train" "$A/ckpt"
for i in $(seq 1 40); do random_file "$A/ds/train/img$i.jpg" $((500 + i * 97)); done
random_file "$A/ckpt/step100.pt" $((6 << 20))
ln -s train/img1.jpg "$A/ds/first"
setfattr -n user.label -v cat "$A/ds/train/img2.jpg"
cp -a "$A/ds" "$TMP/ds-copy" && cp "$A/ckpt/step100.pt" "$TMP/step100.pt"
sync
# the first backup after these writes: one that began after now
t0=$(date +%s)
wait_until 60 eval '[ "$(backup_field time)" -ge "$t0" ] 2>/dev/null' ||
	fail "no backup began within 60 s of the writes (status: $(backup_field name) $(backup_field error))"
name=$(backup_field name)
host=$(backup_field host)
check_eq "$host" "$(hostname)" "the backup's host in status"
"$GRANARY" status "$META" | grep -q "^meta backup: .*by $host" ||
	fail "granary status does not show the backup: $("$GRANARY" status "$META")"
ok "a backup ($name) written by one of two clients, shown by status"

# pruning: with a 2 s interval several more come; at most keep (2) stay,
# plus one being written
wait_until 30 eval '[ "$(backup_field name)" != "$name" ]' || fail "no second backup"
sleep 5
n=$(backups_in_store)
[ "$n" -ge 1 ] && [ "$n" -le 3 ] || fail "$n complete backups in the store with --backup-keep 2"
ok "old backups pruned to --backup-keep ($n in the store)"

# the drill: what is written after the last backup is lost
umount_vol "$B"
mount_vol "$META" "$B" --backup-meta 0
umount_vol "$A"
mount_vol "$META" "$A" --backup-meta 0
last=$(backup_field name)
random_file "$A/ckpt/step200.pt" $((3 << 20))
echo late >"$A/ds/late.txt"
sync
umount_vol "$A"
umount_vol "$B"
before=$(count_objects)
rcli flushdb >/dev/null
out=$("$GRANARY" status "$META" 2>&1) && fail "status of a flushed database succeeded: $out"
ok "Redis lost the volume"

out=$("$GRANARY" load "$META" --from-store "$STORAGE" 2>&1) || fail "load --from-store: $out"
case $out in *"loaded volume 'backup'"*) ;; *) fail "load summary: $out" ;; esac
mount_vol "$META" "$A" --backup-meta 0
diff -r "$TMP/ds-copy" "$A/ds" >"$TMP/diff.out" 2>&1 || fail "the dataset differs after load: $(head -5 "$TMP/diff.out")"
cmp "$TMP/step100.pt" "$A/ckpt/step100.pt" || fail "step100.pt differs after load"
check_eq "$(getfattr --only-values -n user.label "$A/ds/train/img2.jpg" 2>/dev/null)" cat "xattr after load"
check_eq "$(readlink "$A/ds/first")" train/img1.jpg "symlink after load"
[ ! -e "$A/ckpt/step200.pt" ] || fail "a file written after the backup came back"
[ ! -e "$A/ds/late.txt" ] || fail "late.txt came back"
ok "loaded from backup $last: everything written before it reads back byte-exact, what came after is gone"
umount_vol "$A"

"$GRANARY" fsck "$META" -q >"$TMP/fsck.out" 2>&1 || fail "fsck after load: $(cat "$TMP/fsck.out")"
leaked=$("$GRANARY" gc "$META" --json -q --min-age 0 | jq -r .leaked)
[ "$leaked" -ge 2 ] || fail "gc found $leaked leaked objects; the two files written after the backup left at least 2"
check_eq "$(count_objects)" "$before" "gc without --delete deleted nothing"
ok "fsck clean after load; gc finds the lost files' $leaked objects"

# bad input
expect_exit 2 "needs --from-store" "$GRANARY" load "$META" --backup x
expect_exit 2 "give one" "$GRANARY" load "$META" file --from-store "$STORAGE"
rcli flushdb >/dev/null
out=$("$GRANARY" load "$META" --from-store "$STORAGE" --backup 20000101T000000Z-s1 2>&1) &&
	fail "load of a missing backup succeeded"
case $out in *"holds no complete backup '20000101T000000Z-s1'"*"$last"*) ;;
*) fail "missing backup message: $out" ;; esac
mkdir -p "$TMP/empty-pool"
out=$("$GRANARY" load "$META" --from-store "file://$TMP/empty-pool" 2>&1) &&
	fail "load from a store without backups succeeded"
case $out in *"holds no metadata backup"*) ;; *) fail "no-backup message: $out" ;; esac
expect_exit 2 "bad interval '0.5s' for --backup-meta" "$GRANARY" mount "$META" "$TMP/x" --backup-meta 0.5s
expect_exit 2 "bad count '0' for --backup-keep" "$GRANARY" mount "$META" "$TMP/x" --backup-keep 0
ok "bad input: usage errors exit 2, a missing backup or none at all exit 1 with a message"
