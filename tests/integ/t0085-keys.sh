#!/bin/bash
# storage: s3
# t0085-keys.sh - the S3 keys of a mount: keys in the environment override
# the ones kept in the volume settings (key rotation); a mount whose keys
# the store refuses, whose store cannot be reached, or whose store names
# another volume exits 1 with a message that says so and leaves nothing
# mounted, instead of a mount where every close fails. Secrets are never
# printed or logged. The volumes whose mounts must refuse a wrong secret
# are formatted on the shared s3rver and mounted through a strict one of
# the test's own over the same objects (need_strict_s3: the shared one
# accepts any secret), which refuses both a wrong secret and an unknown
# access key (it checks the signature with its own pair, S3RVER/S3RVER).
. "$(dirname "$0")/lib.sh"

need_redis
need_s3
need_strict_s3
RIGHT_AK=$GRANARY_S3_ACCESS_KEY
RIGHT_SK=$GRANARY_S3_SECRET_KEY
WRONG_SK="wrong-secret-$$"
OLD_SK="revoked-secret-$$"
M=$TMP/mnt

# refused_mount REGEX [ENV...]: granary mount of $META on $M, with the
# environment changed by ENV (env(1) arguments) and $MOUNT_EXTRA added to
# its options, must exit 1 with stderr matching REGEX and leave nothing
# mounted; neither its stderr nor its log may hold a secret.
refused_mount() {
	local re=$1 log=$TMP/log-refused.log s; shift
	mkdir -p "$M"
	rm -f "$log"
	MOUNTS="$MOUNTS $M" # a mount that wrongly succeeds is unmounted at exit
	expect_exit 1 "$re" env "$@" timeout 60 "$GRANARY" mount "$META" "$M" \
		--log "$log" --cache-dir "$TMP/cache-refused" ${MOUNT_EXTRA:-}
	is_mounted "$M" && fail "a refused mount ($*) left '$M' mounted"
	for s in "$WRONG_SK" "$OLD_SK" "$RIGHT_SK"; do
		! grep -qF -- "$s" "$TMP/expect.err" "$log" ||
			fail "a secret is in the output or log of the mount ($*)"
	done
}

# on_strict: the volume last made by new_volume, on the strict s3rver
on_strict() {
	rcli HSET setting storage "$(strict_url "$STORAGE")" >/dev/null
}

# The S3 keys of the environment off and back on (the test's commands and
# the mounts they start inherit it).
keys_off() { unset GRANARY_S3_ACCESS_KEY GRANARY_S3_SECRET_KEY AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; }
keys_on() { export GRANARY_S3_ACCESS_KEY=$RIGHT_AK GRANARY_S3_SECRET_KEY=$RIGHT_SK; }
NOENV=(-u GRANARY_S3_ACCESS_KEY -u GRANARY_S3_SECRET_KEY -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY)

# write_read WHAT: with $M mounted, a file written through it (cp checks
# close) reads back after a remount in the same environment.
write_read() {
	random_file "$TMP/src" 300000
	cp "$TMP/src" "$M/f" || fail "write through the mount failed ($1)"
	umount_vol "$M"
	mount_vol "$META" "$M"
	cmp "$TMP/src" "$M/f" || fail "file does not read back after a remount ($1)"
	umount_vol "$M"
}

# --- keys only in the environment (--no-store-keys): a refused key is a
# refused mount, read-write or read-only
new_volume nostore --no-store-keys
on_strict
check_eq "$(rcli HGET setting secret_key)" "" "stored secret with --no-store-keys"
refused_mount "not usable.*(secret|key).*refused" GRANARY_S3_SECRET_KEY="$WRONG_SK"
MOUNT_EXTRA=--read-only refused_mount "not usable.*(secret|key).*refused" \
	GRANARY_S3_SECRET_KEY="$WRONG_SK"
refused_mount "not usable.*(secret|key).*refused" GRANARY_S3_ACCESS_KEY=NOSUCHKEY
refused_mount "no S3 credentials" "${NOENV[@]}"
mount_vol "$META" "$M"
write_read "--no-store-keys, keys in the environment"
ok "--no-store-keys: wrong secret, unknown access key, no keys: exit 1, nothing mounted, no secret shown"

# --- keys kept in the volume settings: the environment overrides them
new_volume stored
on_strict
check_eq "$(rcli HGET setting secret_key)" "$RIGHT_SK" "stored secret"
refused_mount "not usable.*(secret|key).*refused.*came from the environment" \
	GRANARY_S3_SECRET_KEY="$WRONG_SK"
refused_mount "not usable.*(secret|key).*refused.*came from the environment" "${NOENV[@]}" \
	AWS_ACCESS_KEY_ID="$RIGHT_AK" AWS_SECRET_ACCESS_KEY="$WRONG_SK"
keys_off
mount_vol "$META" "$M"
write_read "stored keys, none in the environment"
keys_on
ok "stored keys: a wrong secret in the environment overrides them and is refused; without one they serve"

# key rotation: the stored secret was revoked, the new one is in the
# environment
rcli HSET setting secret_key "$OLD_SK" >/dev/null
mount_vol "$META" "$M"
write_read "revoked stored secret, the new one in the environment"
refused_mount "not usable.*(secret|key).*refused.*came from the volume settings" "${NOENV[@]}"
ok "rotation: the environment's keys override revoked stored ones; the stored ones alone are refused"

# --- a store that cannot be reached at mount time is a refused mount that
# names the URL (a loopback port nobody listens on)
new_volume unreach
port=$(svc_free_port)
rcli HSET setting storage "s3+http://127.0.0.1:$port/granary-test/unreach-$$" >/dev/null
t0=$(date +%s)
refused_mount "127\.0\.0\.1:$port.*refused the connection"
[ $(($(date +%s) - t0)) -lt 30 ] || fail "a mount of an unreachable store took 30 s or more to give up"
ok "unreachable store at mount: exit 1, message names the URL"

# --- a store whose marker names another volume
new_volume other
other_storage=$STORAGE
new_volume mine
rcli HSET setting storage "$other_storage" >/dev/null
refused_mount "holds volume 'other'"
MOUNT_EXTRA=--read-only refused_mount "holds volume 'other'"
ok "a store that names another volume: exit 1, nothing mounted"

# no secret in any mount's log, refused or not
for s in "$WRONG_SK" "$OLD_SK"; do
	! grep -qrF -- "$s" "$TMP"/log-*.log || fail "a secret is in a mount's log"
done
ok "no secret in the logs"
