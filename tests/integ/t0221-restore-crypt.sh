#!/bin/bash
# t0221-restore-crypt.sh - an encrypted volume stays encrypted through its
# backups and restores (issue 32, item 4): status says whether a volume
# is encrypted; the metadata backups of an encrypted volume are sealed in
# the store (no file name in the clear, a key object beside them); `load
# --from-store` needs the key, and refuses a wrong key, a backup altered
# in the store (a part, the manifest), and a backup replaced by a plain
# one without the `crypt` setting (with or without a key given), so that
# whoever can write to the store cannot turn the volume into a plaintext
# one; the backup it accepts restores the volume, encrypted.
. "$(dirname "$0")/lib.sh"

unset GRANARY_ENCRYPT_KEY_FILE GRANARY_ENCRYPT_PASSPHRASE
KEY=$TMP/key
head -c 32 /dev/urandom | base64 >"$KEY"
echo "not the right key at all" >"$TMP/wrong"
MARK="secret-name-$$-Zq9"

vol_json() { "$GRANARY" status --json "$META" 2>/dev/null | jq -r ".volume.$1"; }
backup_time() { "$GRANARY" status --json "$META" 2>/dev/null | jq -r '.meta_backup.time // 0'; }
backup_name() { "$GRANARY" status --json "$META" 2>/dev/null | jq -r '.meta_backup.name'; }
# the file holding object meta/backups/$1 (s3rver: its object file)
obj_file() {
	local d
	for d in $DATA_DIRS; do
		find "$d" -type f \( -path "*/meta/backups/$1" -o \
			-path "*/meta/backups/$1._S3rver_object" \)
	done | head -1
}
obj_rm() { local f; f=$(obj_file "$1"); rm -f "$f" "${f%_object}_metadata.json" "${f%_object}_object.md5"; }
flip_byte() {
	local f=$1 size b
	size=$(stat -c %s "$f")
	b=$(od -An -tu1 -j $((size / 2)) -N1 "$f" | tr -d ' ')
	printf "\\$(printf %03o $((b ^ 1)))" |
		dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc status=none
}
load_store() { "$GRANARY" load -q "$META" --from-store "$STORAGE" "$@"; }
no_volume() { ! "$GRANARY" status "$META" >/dev/null 2>&1; }

# --- status: plain or encrypted
new_volume plain
check_eq "$(vol_json encrypted)" false "status --json of a plain volume"
"$GRANARY" status "$META" | grep -q "^encryption: *off$" ||
	fail "status does not say the plain volume is not encrypted: $("$GRANARY" status "$META")"

new_volume enc --encrypt "$KEY"
check_eq "$(vol_json encrypted)" true "status --json of an encrypted volume"
"$GRANARY" status "$META" | grep -q "^encryption: *on" ||
	fail "status does not say the volume is encrypted: $("$GRANARY" status "$META")"
ok "status says whether a volume is encrypted (text and --json)"

# --- a sealed backup
M=$TMP/m
mount_vol "$META" "$M" --encrypt-key "$KEY" --backup-meta 0
mkdir "$M/$MARK-dir"
for i in 1 2 3; do random_file "$M/$MARK-dir/f$i" $((1000 * i)); cp "$M/$MARK-dir/f$i" "$TMP/f$i"; done
umount_vol "$M"
t0=$(date +%s)
mount_vol "$META" "$M" --encrypt-key "$KEY" --backup-meta 1s
wait_until 60 eval '[ "$(backup_time)" -ge "$t0" ]' || fail "no backup within 60 s"
umount_vol "$M"
NAME=$(backup_name)
kf=$(obj_file "$NAME/key")
[ -n "$kf" ] || fail "no key object beside backup $NAME"
grep -q '"format":"granary-backup-key"' "$kf" || fail "the key object is not one: $(cat "$kf")"
grep -qF "$(rcli HGET setting crypt)" "$kf" || fail "the key object does not hold the volume's record"
[ -n "$(obj_file "$NAME/p00000")" ] && [ -n "$(obj_file "$NAME/done")" ] ||
	fail "backup $NAME lacks its part or manifest"
for d in $DATA_DIRS; do
	! grep -rqF "$MARK" "$d" || fail "a file of the store holds a file name in the clear"
	! grep -rqa 'granary-backup"' "$d" || fail "a manifest in the clear"
done
ok "the encrypted volume's backup $NAME is sealed: no name in the clear, its key record beside it"

# --- load --from-store: no key, a wrong key, then the right one
rcli flushdb >/dev/null
expect_exit 1 "backup '$NAME' is sealed" load_store
grep -q "^hint: give the volume's key file" "$TMP/expect.err" || fail "no hint: $(cat "$TMP/expect.err")"
expect_exit 1 "the key given does not open this volume" load_store --encrypt-key "$TMP/wrong"
no_volume || fail "a refused load left a volume"
GRANARY_ENCRYPT_PASSPHRASE="not the right one" expect_exit 1 \
	"the key given does not open this volume" load_store
no_volume || fail "a refused load left a volume"
expect_exit 1 "holds no complete backup 'nope'" load_store --backup nope --encrypt-key "$KEY"
grep -qF "  $NAME" "$TMP/expect.err" || fail "the backups there are not listed: $(cat "$TMP/expect.err")"
load_store --encrypt-key "$KEY" >"$TMP/load.out" 2>&1 || fail "load --from-store with the key: $(cat "$TMP/load.out")"
check_eq "$(vol_json encrypted)" true "encrypted after the load"
[ "$(vol_json restore_id)" != null ] || fail "status --json shows no restore_id after a load"
"$GRANARY" status "$META" | grep -q "^restored: *by a load" || fail "status does not say the volume was restored"
mount_vol "$META" "$M" --encrypt-key "$KEY" --backup-meta 0
for i in 1 2 3; do cmp "$TMP/f$i" "$M/$MARK-dir/f$i" || fail "f$i after the load"; done
umount_vol "$M"
ok "load --from-store: refused without the key or with a wrong one; with it, the volume comes back encrypted"

# --- tampered backups are refused, never loaded
cp "$(obj_file "$NAME/p00000")" "$TMP/p.bak"
flip_byte "$(obj_file "$NAME/p00000")"
rcli flushdb >/dev/null
expect_exit 1 "authentication check|altered" load_store --encrypt-key "$KEY"
no_volume || fail "a backup with an altered part was loaded"
cp "$TMP/p.bak" "$(obj_file "$NAME/p00000")"
rcli flushdb >/dev/null
cp "$(obj_file "$NAME/done")" "$TMP/done.bak"
flip_byte "$(obj_file "$NAME/done")"
expect_exit 1 "backup '$NAME' failed its check" load_store --encrypt-key "$KEY"
no_volume || fail "a backup with an altered manifest was loaded"
cp "$TMP/done.bak" "$(obj_file "$NAME/done")"
ok "a part or the manifest altered in the store: the load refuses the backup (exit 1), nothing loaded"

# the backup replaced by a plain one without `crypt`: what an attacker
# who can write to the store (and not read it) would do to turn the
# volume into a plaintext one
rcli flushdb >/dev/null
load_store --encrypt-key "$KEY" >/dev/null 2>&1 || fail "load of the untouched backup"
"$GRANARY" dump -q "$META" "$TMP/d.jsonl" || fail "dump"
{ head -1 "$TMP/d.jsonl" | jq -c 'del(.setting.crypt)'; sed 1d "$TMP/d.jsonl"; } >"$TMP/stripped.jsonl"
grep -q '"crypt"' "$TMP/stripped.jsonl" && fail "the crypt setting was not stripped"
bytes=$(stat -c %s "$TMP/stripped.jsonl")
cp "$TMP/stripped.jsonl" "$(obj_file "$NAME/p00000")"
printf '{"format":"granary-backup","version":1,"name":"%s","time":%s,"sid":1,"host":"x","parts":1,"bytes":%s,"inodes":5,"seconds":0.1}\n' \
	"$NAME" "$t0" "$bytes" >"$(obj_file "$NAME/done")"
obj_rm "$NAME/key"
[ -z "$(obj_file "$NAME/key")" ] || fail "the key object is still there"
rcli flushdb >/dev/null
expect_exit 1 "backup '$NAME' is not sealed, but a key was given" load_store --encrypt-key "$KEY"
no_volume || fail "a plain backup was loaded with a key given"
expect_exit 1 "no \"crypt\" setting" load_store
no_volume || fail "a plain backup without crypt was loaded over a store of sealed objects"
ok "a backup replaced by a plain one without 'crypt': refused with or without the key"

# and a dump file stripped alike, loaded with the key given: refused
rcli flushdb >/dev/null
expect_exit 1 "no \"crypt\" setting" "$GRANARY" load -q "$META" "$TMP/stripped.jsonl" --encrypt-key "$KEY"
no_volume || fail "a stripped dump was loaded with a key given"
ok "a dump without 'crypt' loaded with a key given: refused"
