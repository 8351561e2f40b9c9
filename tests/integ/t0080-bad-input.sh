#!/bin/bash
# storage: file
# t0080-bad-input.sh - wrong keys, missing buckets, unreachable Redis,
# malformed URLs, usage errors and a corrupted block object: each gives the
# documented exit code and a message that names the problem, nothing is
# half-written, and a corrupt block is an EIO that leaves the mount alive.
. "$(dirname "$0")/lib.sh"

need_redis
need_s3
need_strict_s3 # refuses a wrong secret, which the shared s3rver accepts
db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
meta="$GRANARY_TEST_REDIS?db=$db"
s3vol="$GRANARY_TEST_S3/granary-test/bad-$$"
dbsize() { redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" dbsize; }

# --- S3 credentials and bucket
GRANARY_S3_SECRET_KEY=wrong-secret expect_exit 1 "key|secret|signature|credential" \
	"$GRANARY" format "$meta" bad --storage "$(strict_url "$s3vol")"
check_eq "$(dbsize)" 0 "redis keys after a format refused for a wrong secret"
GRANARY_S3_ACCESS_KEY=NOSUCHKEY expect_exit 1 "key|secret|signature|credential" \
	"$GRANARY" format "$meta" bad --storage "$s3vol"
expect_exit 1 "bucket" "$GRANARY" format "$meta" bad \
	--storage "$GRANARY_TEST_S3/no-such-bucket-$$"
check_eq "$(dbsize)" 0 "redis keys after a format refused for a missing bucket"
ok "wrong secret/key and missing bucket: exit 1, message names it, nothing written"

# --- unreachable Redis
for url in "unix://$TMP/no/such/redis.sock?db=1" "redis://127.0.0.1:1/0"; do
	expect_exit 1 "cannot reach" "$GRANARY" format "$url" bad --storage "file://$TMP/d"
	mkdir -p "$TMP/mp-unreach"
	expect_exit 1 "cannot reach" "$GRANARY" mount "$url" "$TMP/mp-unreach"
	expect_exit 1 "cannot reach" "$GRANARY" status "$url"
done
is_mounted "$TMP/mp-unreach" && fail "a failed mount left a mount behind"
ok "unreachable redis (missing socket, closed port): exit 1 'cannot reach'"

# --- malformed URLs: exit 1 or 2 with a message, no crash
for url in "foo://x" "redis://:@" "" "redis://127.0.0.1:notaport/0" "unix://"; do
	expect_exit "1|2" "." "$GRANARY" format "$url" bad --storage "file://$TMP/d"
done
for st in "file://" "s3://host" "s3+http://127.0.0.1:1" "ftp://x/y" "nonsense"; do
	expect_exit "1|2" "." "$GRANARY" format "$meta" bad --storage "$st"
	check_eq "$(dbsize)" 0 "redis keys after a format refused for storage '$st'"
done
ok "malformed meta and storage URLs refused with a message"

# --- format over an existing volume
mkdir -p "$TMP/d"
"$GRANARY" format "$meta" good --storage "file://$TMP/d" >"$TMP/fmt.out" 2>&1 ||
	fail "format failed: $(cat "$TMP/fmt.out")"
grep -q "formatted volume 'good'" "$TMP/fmt.out" ||
	fail "format printed: $(cat "$TMP/fmt.out")"
expect_exit 1 "--force" "$GRANARY" format "$meta" again --storage "file://$TMP/d"
"$GRANARY" format "$meta" again --storage "file://$TMP/d" --force >/dev/null 2>&1 ||
	fail "format --force over an existing volume failed"
"$GRANARY" status "$meta" >"$TMP/status.out" 2>&1 || fail "status failed: $(cat "$TMP/status.out")"
grep -q again "$TMP/status.out" || fail "status does not show the reformatted name: $(cat "$TMP/status.out")"
ok "format refuses an existing volume (mentions --force); --force works"

# --- two volumes on one storage would overwrite each other's objects
db2=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db2" flushdb >/dev/null
meta2="$GRANARY_TEST_REDIS?db=$db2"
dbsize2() { redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db2" dbsize; }
grep -qx "name=again" "$TMP/d/granary.volume" ||
	fail "the storage's volume marker does not name 'again': $(cat "$TMP/d/granary.volume")"
expect_exit 1 "already holds volume 'again'" "$GRANARY" format "$meta2" other --storage "file://$TMP/d"
check_eq "$(dbsize2)" 0 "redis keys after a format refused for a storage in use"
# on S3 too, and with --force (which replaces the database's volume, not
# another one's storage)
"$GRANARY" format "$meta2" other --storage "$s3vol" >"$TMP/fmt.out" 2>&1 ||
	fail "format on S3 failed: $(cat "$TMP/fmt.out")"
expect_exit 1 "already holds volume 'other'" "$GRANARY" format "$meta" third --storage "$s3vol" --force
expect_exit 1 "already holds volume 'again'" "$GRANARY" format "$meta2" third --storage "file://$TMP/d" --force
# the refused formats left the marker alone: the volume still mounts
mount_vol "$meta" "$TMP/mp-own"
echo kept >"$TMP/mp-own/f" || fail "write to the volume failed"
umount_vol "$TMP/mp-own"
# a storage that names another volume is refused at mount, nothing mounted
mkdir -p "$TMP/d2"
"$GRANARY" format "$meta2" other --storage "file://$TMP/d2" --force >/dev/null 2>&1 ||
	fail "format --force on an empty storage failed"
cp "$TMP/d/granary.volume" "$TMP/marker.keep"
cp "$TMP/d2/granary.volume" "$TMP/d/granary.volume"
mkdir -p "$TMP/mp-wrong"
expect_exit 1 "holds volume 'other'" "$GRANARY" mount "$meta" "$TMP/mp-wrong"
is_mounted "$TMP/mp-wrong" && fail "a mount refused for another volume's storage is mounted"
# a volume from before the marker gets it at its first read-write mount,
# not at a read-only one
rm "$TMP/d/granary.volume"
mount_vol "$meta" "$TMP/mp-own" --read-only
umount_vol "$TMP/mp-own"
[ -e "$TMP/d/granary.volume" ] && fail "a read-only mount wrote the volume marker"
mount_vol "$meta" "$TMP/mp-own"
check_eq "$(cat "$TMP/mp-own/f")" kept "file of the volume after its marker was lost"
umount_vol "$TMP/mp-own"
cmp -s "$TMP/d/granary.volume" "$TMP/marker.keep" ||
	fail "the first read-write mount did not write the volume's marker: $(cat "$TMP/d/granary.volume" 2>&1)"
# an object in the marker's place that is not a marker: refused, as format
# refuses it
echo "not a marker" >"$TMP/d/granary.volume"
expect_exit 1 "not a granary volume marker" "$GRANARY" mount "$meta" "$TMP/mp-wrong"
is_mounted "$TMP/mp-wrong" && fail "a mount refused for a foreign marker object is mounted"
cp "$TMP/marker.keep" "$TMP/d/granary.volume"
ok "a storage holds one volume: format and mount refuse another's or a foreign marker, a lost marker comes back"

# --- mount errors and usage errors
expect_exit 1 "does not exist|no such" "$GRANARY" mount "$meta" "$TMP/no/such/dir"
expect_exit 2 "usage" "$GRANARY" format --no-such-flag
expect_exit 2 "usage" "$GRANARY" mount "$meta" "$TMP/mp-unreach" --no-such-flag
expect_exit 2 "usage" "$GRANARY" umount --no-such-flag "$TMP/x"
expect_exit 2 "usage" "$GRANARY" status "$meta" stray-argument
expect_exit 2 "." "$GRANARY" no-such-command
expect_exit 2 "usage" "$GRANARY" format "$meta"
"$GRANARY" mount --help >"$TMP/help.out" 2>&1 || fail "mount --help did not exit 0"
grep -qi usage "$TMP/help.out" || fail "mount --help printed no usage"
is_mounted "$TMP/mp-unreach" && fail "a failed mount left a mount behind"
ok "missing mount point: exit 1; unknown flags, stray args: exit 2"

# --- a corrupted block object is an EIO, and the mount stays alive
GRANARY_STORAGE="file"
new_volume corrupt --compress none
M=$TMP/mnt
mount_vol "$META" "$M"
random_file "$TMP/victim" 300000
cp "$TMP/victim" "$M/victim"
umount_vol "$M"
objs=$(find $DATA_DIRS -type f \( -path '*/blocks/*' -o -path '*/packs/*' \) | sort)
[ -n "$objs" ] || fail "no data objects under $DATA_DIRS"
mount_vol "$META" "$M"
random_file "$TMP/fine" 200000
cp "$TMP/fine" "$M/fine"
umount_vol "$M"
obj=$(echo "$objs" | head -n 1)
osize=$(stat -c %s "$obj")
printf '\xde\xad\xbe\xef\x01\x02\x03\x04' |
	dd of="$obj" bs=1 seek=$((osize / 2)) conv=notrunc status=none
mount_vol "$META" "$M"
expect_errno "Input/output error" cat "$M/victim"
ls "$M" >/dev/null || fail "ls fails after reading a corrupt block"
cmp "$TMP/fine" "$M/fine" || fail "another file does not read back after a corrupt block"
expect_errno "Input/output error" cat "$M/victim"
check_eq "$(ls "$M" | tr '\n' ' ')" "fine victim " "listing after the corrupt read"
ok "corrupted block: read gives 'Input/output error', mount still alive"
umount_vol "$M"
