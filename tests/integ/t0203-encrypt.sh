#!/bin/bash
# t0203-encrypt.sh - encryption at rest as a user sees it: a volume
# formatted with --encrypt reads back byte-exact, while neither its store
# nor the disk cache holds a plaintext byte of it; a wrong or missing key
# is refused before anything is mounted; an object altered or swapped in
# the store reads as EIO with a log line naming it; the key file changes
# with `granary key change`, and the setting survives dump and load.
. "$(dirname "$0")/lib.sh"

unset GRANARY_ENCRYPT_KEY_FILE GRANARY_ENCRYPT_PASSPHRASE
KEY=$TMP/key
head -c 32 /dev/urandom | base64 >"$KEY"
MARK="granary-plaintext-marker-$$-q7Zx"

# the raw files holding objects (s3rver: a file per object and sidecars)
object_files() {
	local d
	for d in $DATA_DIRS; do
		[ -d "$d" ] || continue
		find "$d" -type f \( -path '*/blocks/*' -o -path '*/packs/*' \) \
			! -name '*._S3rver_metadata.json' \
			! -name '*._S3rver_object.md5' ! -name '*.tmp*' \
			! -name '.granary-tmp.*'
	done | sort
}

# small files (packed), and one of 3 blocks; uncompressed, so that only
# the encryption can hide the marker
write_files() {
	local m=$1 i
	for i in $(seq 1 20); do
		printf '%s small %d\n' "$MARK" "$i" >"$m/small-$i"
	done
	{
		for i in $(seq 1 3000); do echo "$MARK line $i"; done
		head -c $((9 << 20)) /dev/urandom
		for i in $(seq 1 3000); do echo "$MARK tail $i"; done
	} >"$TMP/big"
	cp "$TMP/big" "$m/big"
}

# --- the control: without encryption the marker is in the store
new_volume plain --compress none
mount_vol "$META" "$TMP/plain"
printf '%s plain\n' "$MARK" >"$TMP/plain/f"
umount_vol "$TMP/plain"
# shellcheck disable=SC2046
grep -qF "$MARK" $(object_files) ||
	fail "the control failed: the plain volume's objects do not hold the marker"
ok "control: a plain volume's objects hold the marker"

# a key given for a volume that is not encrypted: refused, nothing
# mounted (another volume's key, or a volume whose crypt setting is gone)
PLAIN_META=$META
mkdir -p "$TMP/plain2"
expect_exit 1 "volume 'plain': a key was given, but the volume is not encrypted" \
	"$GRANARY" mount "$META" "$TMP/plain2" --encrypt-key "$KEY" \
	--log "$TMP/log-plain2.log"
check_eq "$(grep -c "^granary: cannot mount" "$TMP/expect.err")" 1 "lines of the refusal"
grep -q "^hint: a key for another volume" "$TMP/expect.err" || fail "no hint: $(cat "$TMP/expect.err")"
! is_mounted "$TMP/plain2" || fail "mounted with a key for a plain volume"
GRANARY_ENCRYPT_PASSPHRASE="some passphrase" expect_exit 1 \
	"a key was given, but the volume is not encrypted" \
	"$GRANARY" mount "$META" "$TMP/plain2" --log "$TMP/log-plain2.log"
! is_mounted "$TMP/plain2" || fail "mounted with a passphrase for a plain volume"
GRANARY_ENCRYPT_PASSPHRASE="some passphrase" expect_exit 1 \
	"volume 'plain': a key was given, but the volume is not encrypted" \
	"$GRANARY" fsck --objects "$PLAIN_META"
mount_vol "$META" "$TMP/plain"
check_eq "$(cat "$TMP/plain/f")" "$MARK plain" "the plain volume mounted without a key"
umount_vol "$TMP/plain"
ok "a key for a plain volume: mount and tools refuse it (exit 1), without one it works"

# bad key files are refused before anything is written
new_db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$new_db" flushdb >/dev/null
expect_exit 1 "cannot load the encryption key from '$TMP/nokey': No such file" \
	"$GRANARY" format "$GRANARY_TEST_REDIS?db=$new_db" x \
	--storage "file://$TMP/data-x" --encrypt "$TMP/nokey"
echo short >"$TMP/short"
expect_exit 1 "shorter than 8 bytes" \
	"$GRANARY" format "$GRANARY_TEST_REDIS?db=$new_db" x \
	--storage "file://$TMP/data-x" --encrypt "$TMP/short"
check_eq "$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$new_db" dbsize)" 0 \
	"keys written by a refused format"
ok "format --encrypt with a missing or short key file: exit 1, nothing written"

# --- format and use an encrypted volume
new_volume enc --compress none --encrypt "$KEY"
grep -q "formatted encrypted volume 'enc'" "$TMP/format-enc.out" ||
	fail "format did not say the volume is encrypted: $(cat "$TMP/format-enc.out")"
REC=$(rcli HGET setting crypt)
[[ $REC == v1:scrypt:* ]] || fail "setting crypt is '$REC'"
M=$TMP/mnt
mount_vol "$META" "$M" --encrypt-key "$KEY"
write_files "$M"
check_eq "$(cat "$M/small-7")" "$MARK small 7" "a small file as written"
umount_vol "$M"
rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M" --encrypt-key "$KEY"
for i in $(seq 1 20); do
	check_eq "$(cat "$M/small-$i")" "$MARK small $i" "small-$i after a cold remount"
done
cmp "$TMP/big" "$M/big" || fail "the big file differs after a cold remount"
ok "format --encrypt, write, cold remount: every byte read back"

n=$(object_files | wc -l)
[ "$n" -ge 4 ] || fail "only $n objects in the store"
# shellcheck disable=SC2046
! grep -qF "$MARK" $(object_files) ||
	fail "the store holds the plaintext marker"
! grep -rqF "$MARK" "$DATA_DIRS" || fail "some file of the store holds the marker"
ok "the store's $n objects hold no plaintext"

umount_vol "$M"
nc=$(find "$TMP/cache-mnt" -type f | wc -l)
[ "$nc" -ge 2 ] || fail "the disk cache holds $nc files: nothing to check"
! grep -rqF "$MARK" "$TMP/cache-mnt" || fail "the disk cache holds the marker"
ok "the disk cache's $nc files hold no plaintext"

# --- wrong key, no key: refused before mounting
echo "not the right key at all" >"$TMP/wrong"
mkdir -p "$TMP/m2"
expect_exit 1 "the key given does not open this volume" \
	"$GRANARY" mount "$META" "$TMP/m2" --encrypt-key "$TMP/wrong" \
	--log "$TMP/log-m2.log"
grep -q "^hint: " "$TMP/expect.err" || fail "no hint for a wrong key"
! is_mounted "$TMP/m2" || fail "mounted with a wrong key"
expect_exit 1 "the volume is encrypted and no key was given" \
	"$GRANARY" mount "$META" "$TMP/m2" --log "$TMP/log-m2.log"
! is_mounted "$TMP/m2" || fail "mounted without a key"
GRANARY_ENCRYPT_PASSPHRASE="not the right one" expect_exit 1 \
	"the key given does not open this volume" \
	"$GRANARY" mount "$META" "$TMP/m2" --log "$TMP/log-m2.log"
expect_exit 1 "the volume is encrypted and no key was given" \
	"$GRANARY" fsck --objects "$META"
ok "a wrong or missing key: exit 1, the message, nothing mounted"

# --- tools with the key; fsck clean
GRANARY_ENCRYPT_KEY_FILE=$KEY "$GRANARY" fsck --deep "$META" \
	>"$TMP/fsck.out" 2>&1 || fail "fsck --deep with the key: $(cat "$TMP/fsck.out")"
ok "fsck --deep with the key runs clean"

# --- key change
head -c 32 /dev/urandom | base64 >"$TMP/key2"
expect_exit 1 "does not open this volume" \
	"$GRANARY" key change "$META" --old "$TMP/wrong" --new "$TMP/key2"
"$GRANARY" key change "$META" --old "$KEY" --new "$TMP/key2" \
	>"$TMP/key.out" 2>&1 || fail "key change: $(cat "$TMP/key.out")"
[ "$(rcli HGET setting crypt)" != "$REC" ] || fail "the record did not change"
expect_exit 1 "the key given does not open this volume" \
	"$GRANARY" mount "$META" "$TMP/m2" --encrypt-key "$KEY" \
	--log "$TMP/log-m2.log"
GRANARY_ENCRYPT_KEY_FILE=$TMP/key2 mount_vol "$META" "$M"
cmp "$TMP/big" "$M/big" || fail "the big file differs after the key change"
ok "key change: the old key file refused, the new one reads every byte"

# --- altered and swapped objects read as EIO
object_files >"$TMP/before"
random_file "$TMP/v1" $((1536 << 10))
random_file "$TMP/v2" $((1536 << 10))
cp "$TMP/v1" "$M/v1" && sync "$M/v1"
object_files >"$TMP/after1"
cp "$TMP/v2" "$M/v2" && sync "$M/v2"
object_files >"$TMP/after2"
umount_vol "$M"
o1=$(comm -13 "$TMP/before" "$TMP/after1")
o2=$(comm -13 "$TMP/after1" "$TMP/after2")
[ "$(echo "$o1" | wc -w)" = 1 ] && [ "$(echo "$o2" | wc -w)" = 1 ] ||
	fail "expected one new object per file: '$o1' '$o2'"
check_eq "$(stat -c %s "$o1")" "$(stat -c %s "$o2")" "sizes of the two objects"
cp "$o1" "$TMP/o1.bak"
cp "$o2" "$o1"      # v1 now holds v2's sealed bytes
cp "$TMP/o1.bak" "$o2" # and v2 v1's
rm -rf "$TMP/cache-mnt"
: >"$TMP/log-mnt.log"
GRANARY_ENCRYPT_KEY_FILE=$TMP/key2 mount_vol "$META" "$M"
expect_errno "Input/output error" cat "$M/v1"
expect_errno "Input/output error" cat "$M/v2"
# the log names the object
name1=$(basename "${o1%._S3rver_object}")
grep -q "object '[^']*$name1' .*failed its authentication check" \
	"$TMP/log-mnt.log" || fail "the log does not name object $name1"
cmp "$TMP/big" "$M/big" || fail "the big file differs beside the swapped ones"
ok "two objects swapped in the store: EIO, the log names them"

umount_vol "$M"
cp "$TMP/o1.bak" "$o1"
size=$(stat -c %s "$o1")
b=$(od -An -tu1 -j $((size / 2)) -N1 "$o1" | tr -d ' ')
printf "\\$(printf %03o $((b ^ 1)))" |
	dd of="$o1" bs=1 seek=$((size / 2)) conv=notrunc status=none
cmp -s "$o1" "$TMP/o1.bak" && fail "the byte was not flipped"
rm -rf "$TMP/cache-mnt"
: >"$TMP/log-mnt.log"
GRANARY_ENCRYPT_KEY_FILE=$TMP/key2 mount_vol "$META" "$M"
expect_errno "Input/output error" cat "$M/v1"
grep -q "object '[^']*$name1' .*bad tag" "$TMP/log-mnt.log" ||
	fail "the log does not name the altered object"
ok "a flipped byte in an object: EIO, never other bytes"
umount_vol "$M"

# --- dump and load carry the wrapped key
"$GRANARY" dump "$META" >"$TMP/dump.json" 2>"$TMP/dump.err" ||
	fail "dump: $(cat "$TMP/dump.err")"
grep -q '"crypt"' "$TMP/dump.json" || fail "the dump lacks the crypt setting"
db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
META2="$GRANARY_TEST_REDIS?db=$db"
"$GRANARY" load "$META2" "$TMP/dump.json" >"$TMP/load.out" 2>&1 ||
	fail "load: $(cat "$TMP/load.out")"
check_eq "$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" HGET setting crypt)" \
	"$(rcli HGET setting crypt)" "the crypt setting after dump and load"
ok "dump and load keep the wrapped volume key"
