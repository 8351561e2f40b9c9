#!/bin/bash
# t0220-restore-ids.sh - a restored volume never reads another file's
# bytes (issue 32, item 1). A dump (or a backup in the store) is taken;
# then a writer w writes A4 and a reader c reads it, which leaves A4's
# object in c's disk cache; the volume is restored from the dump (the
# write of A4 is lost), gc deletes the lost objects, fsck is clean; w and
# c mount again, c with the same cache directory, w writes B4: c must
# read B4's bytes. Before the fix, the restored volume handed A4's ids
# out again and c served A4's cached object for B4, checksum and all.
# Three ways: a dump file; a --writeback writer; an encrypted volume
# restored with `load --from-store`. And the ids the load hands out
# start in a new epoch, past anything the lost interval could use.
. "$(dirname "$0")/lib.sh"

unset GRANARY_ENCRYPT_KEY_FILE GRANARY_ENCRYPT_PASSPHRASE
KEY=$TMP/key
head -c 32 /dev/urandom | base64 >"$KEY"

gsync() { setfattr -n granary.sync -v 1 "$1"; }
backup_time() {
	"$GRANARY" status --json "$META" 2>/dev/null | jq -r '.meta_backup.time // 0'
}

# drill NAME MODE: MODE is plain (dump file), writeback (dump file, the
# writer with --writeback) or crypt (encrypted volume, load --from-store)
drill() {
	local name=$1 mode=$2 W=$TMP/w-$1 C=$TMP/c-$1 wargs=() cargs=() t0
	local kenv=()
	case $mode in
	plain) new_volume "$name" ;;
	writeback)
		new_volume "$name"
		wargs=(--writeback --pack-window 60s)
		;;
	crypt)
		new_volume "$name" --encrypt "$KEY"
		wargs=(--encrypt-key "$KEY")
		cargs=(--encrypt-key "$KEY")
		kenv=(GRANARY_ENCRYPT_KEY_FILE="$KEY")
		;;
	esac
	# something from before the dump, read back after the restore
	mount_vol "$META" "$W" "${wargs[@]}" --backup-meta 0
	random_file "$TMP/old-$name" 70000
	cp "$TMP/old-$name" "$W/old"
	[ "$mode" != writeback ] || gsync "$W"
	umount_vol "$W"
	if [ "$mode" = crypt ]; then
		# a backup in the store, by a client that hands out no id
		t0=$(date +%s)
		mount_vol "$META" "$W" "${wargs[@]}" --backup-meta 1s
		wait_until 60 eval '[ "$(backup_time)" -ge "$t0" ]' ||
			fail "no backup within 60 s"
		umount_vol "$W"
	else
		"$GRANARY" dump -q "$META" "$TMP/d-$name.jsonl" || fail "dump"
	fi

	# the interval the restore loses: A4 written on w, read on c
	mount_vol "$META" "$W" "${wargs[@]}" --backup-meta 0
	mount_vol "$META" "$C" "${cargs[@]}" --backup-meta 0
	random_file "$TMP/A4-$name" 100000
	cp "$TMP/A4-$name" "$W/A4"
	[ "$mode" != writeback ] || gsync "$W"
	cmp "$TMP/A4-$name" "$C/A4" || fail "c reads A4 otherwise before the restore"
	umount_vol "$C"
	umount_vol "$W"
	nc=$(find "$TMP/cache-c-$name" -type f | wc -l)
	[ "$nc" -ge 1 ] || fail "c's disk cache holds nothing: the test tests nothing"
	uuid=$(rcli HGET setting uuid)
	[ -d "$TMP/cache-c-$name/$uuid" ] || fail "no cache namespace $uuid"

	# the restore, as the drill says
	rcli flushdb >/dev/null
	if [ "$mode" = crypt ]; then
		env "${kenv[@]}" "$GRANARY" load -q "$META" --from-store "$STORAGE" \
			>"$TMP/load.out" 2>&1 || fail "load --from-store: $(cat "$TMP/load.out")"
	else
		"$GRANARY" load -q "$META" "$TMP/d-$name.jsonl" >"$TMP/load.out" 2>&1 ||
			fail "load: $(cat "$TMP/load.out")"
	fi
	env "${kenv[@]}" "$GRANARY" gc -q "$META" --delete --min-age 0 \
		>"$TMP/gc.out" 2>&1 || fail "gc --delete: $(cat "$TMP/gc.out")"
	"$GRANARY" fsck -q "$META" >"$TMP/fsck.out" 2>&1 ||
		fail "fsck after the load: $(cat "$TMP/fsck.out")"

	# the restored volume: w writes B4, c (same cache dir) reads it
	mount_vol "$META" "$W" "${wargs[@]}" --backup-meta 0
	mount_vol "$META" "$C" "${cargs[@]}" --backup-meta 0
	[ ! -e "$C/A4" ] || fail "A4 came back with the restore"
	# c's cache of before the restore is another namespace, removed
	rid=$(rcli HGET setting restore_id)
	[ -d "$TMP/cache-c-$name/$uuid.$rid" ] || fail "no cache namespace $uuid.$rid"
	wait_until 30 eval '! ls -a "$TMP/cache-c-$name" | grep -qE "^($uuid|\.sweep-.*)\$"' ||
		fail "the cache namespace of before the restore is still there: $(ls -a "$TMP/cache-c-$name")"
	random_file "$TMP/B4-$name" 100000
	cp "$TMP/B4-$name" "$W/B4"
	[ "$mode" != writeback ] || gsync "$W"
	cmp "$TMP/B4-$name" "$C/B4" >/dev/null 2>&1 ||
		fail "c reads other bytes than B4's after the restore$(
			cmp -s "$TMP/A4-$name" "$C/B4" && echo ": A4's, from its cache")"
	cmp "$TMP/B4-$name" "$W/B4" || fail "w reads B4 otherwise"
	cmp "$TMP/old-$name" "$C/old" || fail "c reads the file of before the dump otherwise"
	umount_vol "$C"
	umount_vol "$W"
	# and once more from the store alone (c's cache emptied)
	rm -rf "$TMP/cache-c-$name"
	mount_vol "$META" "$C" "${cargs[@]}" --backup-meta 0
	cmp "$TMP/B4-$name" "$C/B4" || fail "B4 in the store is not B4"
	umount_vol "$C"
	env "${kenv[@]}" "$GRANARY" fsck -q --objects "$META" >"$TMP/fsck.out" 2>&1 ||
		fail "fsck --objects after the drill: $(cat "$TMP/fsck.out")"
	ok "$mode: after the restore, the reader with the same cache reads B4's bytes, not A4's"
}

drill plain plain
# the ids of the load: a new epoch (2^40 for slices, 2^32 for inodes)
ns=$(rcli GET nextslice)
ni=$(rcli GET nextinode)
[ "$ns" -ge $((1 << 40)) ] || fail "nextslice after a load is $ns, not in a new epoch"
[ "$ni" -ge $((1 << 32)) ] || fail "nextinode after a load is $ni, not in a new epoch"
ok "a load starts slice ids and inode numbers in a new epoch ($ns, $ni)"

drill wb writeback
drill enc crypt
