#!/bin/bash
# storage: s3
# serial: a refused format must end within 2 s; other tests' load can stretch it
# t0204-s3v4-volume.sh - a whole volume through the S3 server that
# verifies Signature V4 (tests/lib/s3v4-front.js: every request's
# signature recomputed with the aws4 npm package): format, mount, files
# written and read back byte-exact from a second node (a multi-block file
# and small packed ones), gc and fsck clean; path-style and
# virtual-hosted-style (the bucket in the signed Host, reached through
# GRANARY_S3_CONNECT_TO). A wrong secret fails format at once (EAUTH,
# not retried through the window), naming the cause. Temporary
# credentials (STS): their session token is sent, signed.
# Runs once: it tests the V4 signer, not a storage family.
. "$(dirname "$0")/lib.sh"

need_redis
need_s3v4
PORT=$GRANARY_TEST_S3V4_PORT
export GRANARY_S3_ACCESS_KEY=$GRANARY_TEST_S3V4_ACCESS_KEY
export GRANARY_S3_SECRET_KEY=$GRANARY_TEST_S3V4_SECRET_KEY

# volume_on STYLE STORAGE: format, write, read back from a cold node,
# gc and fsck, on STORAGE
volume_on() {
	local style=$1 storage=$2 db
	db=$(next_db)
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	META="$GRANARY_TEST_REDIS?db=$db"

	local t0=$SECONDS
	# GRANARY_DEBUG=1: the library's log lines (the S3 error) on stderr
	GRANARY_DEBUG=1 GRANARY_S3_SECRET_KEY=not-the-secret expect_exit 1 "secret" \
		"$GRANARY" format "$META" v4bad --storage "$storage"
	[ $((SECONDS - t0)) -lt 2 ] ||
		fail "$style: format with a wrong secret took $((SECONDS - t0)) s: retried?"
	grep -q "SignatureDoesNotMatch" "$TMP/expect.err" ||
		fail "$style: no S3 error code above the refusal: $(head -c 600 "$TMP/expect.err")"
	check_eq "$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" dbsize)" 0 \
		"$style: redis keys after the refused format"

	"$GRANARY" format "$META" "v4$style" --storage "$storage" --trash-days 0 \
		>"$TMP/format.out" 2>&1 || fail "$style: format: $(cat "$TMP/format.out")"
	mount_vol "$META" "$TMP/w-$style"
	random_file "$TMP/big" $((9 * 1024 * 1024 + 4321))
	cp "$TMP/big" "$TMP/w-$style/big"
	for i in $(seq 1 20); do random_file "$TMP/w-$style/small$i" $((i * 700)); done
	umount_vol "$TMP/w-$style"
	# another node, its cache empty: every byte from the store
	mount_vol "$META" "$TMP/r-$style"
	cmp "$TMP/big" "$TMP/r-$style/big" || fail "$style: the multi-block file differs"
	for i in $(seq 1 20); do
		check_eq "$(stat -c %s "$TMP/r-$style/small$i")" $((i * 700)) "$style: size of small$i"
	done
	# the small ones, byte-exact: copied out and back in, compared
	tar -C "$TMP/r-$style" -cf "$TMP/small.tar" $(cd "$TMP/r-$style" && ls small*)
	rm -f "$TMP/r-$style/big"
	umount_vol "$TMP/r-$style"
	"$GRANARY" gc "$META" -q >"$TMP/gc.out" 2>&1 || fail "$style: gc: $(cat "$TMP/gc.out")"
	"$GRANARY" fsck "$META" --deep -q >"$TMP/fsck.out" 2>&1 ||
		fail "$style: fsck: $(cat "$TMP/fsck.out")"
	mount_vol "$META" "$TMP/c-$style"
	mkdir "$TMP/small-$style"
	tar -C "$TMP/small-$style" -xf "$TMP/small.tar"
	for i in $(seq 1 20); do
		cmp "$TMP/small-$style/small$i" "$TMP/c-$style/small$i" ||
			fail "$style: small$i differs after gc"
	done
	[ ! -e "$TMP/c-$style/big" ] || fail "$style: the removed file is back"
	umount_vol "$TMP/c-$style"
}

volume_on path "$GRANARY_TEST_S3V4/granary-test/t0204-$$-path"
ok "path-style V4: format, 9 MiB and 20 small files byte-exact from a cold node, gc and fsck clean; a wrong secret fails format at once"

export GRANARY_S3_CONNECT_TO=127.0.0.1:$PORT
volume_on virtual "s3+http://s3.amazonaws.com:$PORT/granary-test/t0204-$$-vh?style=virtual"
unset GRANARY_S3_CONNECT_TO
ok "virtual-hosted-style V4 (bucket in the signed Host): the same"

# Temporary credentials (STS): the front takes its temporary key only with
# the session token, signed, on every request. Format with the token in
# the environment (the keys are not kept in the settings: they expire),
# mount through mount.granary with a credentials file holding the three,
# gc and fsck with the environment's. Without the token: refused.
unset GRANARY_S3_ACCESS_KEY GRANARY_S3_SECRET_KEY
export AWS_ACCESS_KEY_ID=$GRANARY_TEST_S3V4_TEMP_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$GRANARY_TEST_S3V4_TEMP_SECRET_KEY
db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
META="$GRANARY_TEST_REDIS?db=$db"
STS="$GRANARY_TEST_S3V4/granary-test/t0204-$$-sts"
GRANARY_DEBUG=1 expect_exit 1 "cannot|refused|denied|key" \
	"$GRANARY" format "$META" v4sts --storage "$STS"
grep -q "InvalidAccessKeyId" "$TMP/expect.err" ||
	fail "sts: a temporary key without its token: $(head -c 600 "$TMP/expect.err")"
export AWS_SESSION_TOKEN=$GRANARY_TEST_S3V4_SESSION_TOKEN
"$GRANARY" format "$META" v4sts --storage "$STS" --trash-days 0 \
	>"$TMP/format.out" 2>&1 || fail "sts: format: $(cat "$TMP/format.out")"
grep -q "temporary: not kept" "$TMP/format.out" ||
	fail "sts: format kept the temporary keys quietly: $(cat "$TMP/format.out")"
"$GRANARY" status "$META" --json | grep -q '"access_key": "(not set)"' ||
	fail "sts: temporary keys kept in the settings: $("$GRANARY" status "$META" --json | head -c 600)"
CRED=$TMP/sts.cred
printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nAWS_SESSION_TOKEN=%s\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$AWS_SESSION_TOKEN" >"$CRED"
chmod 600 "$CRED"
mkdir -p "$TMP/sts"
MOUNTS="$MOUNTS $TMP/sts"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
	GRANARY_BIN="$GRANARY" "$TOPDIR/tools/mount.granary" "$META" "$TMP/sts" \
	-o "credentials=$CRED,log=$TMP/log-sts.log,cache-dir=$TMP/cache-sts" \
	>"$TMP/h.out" 2>&1 || fail "sts: mount.granary: $(cat "$TMP/h.out")"
random_file "$TMP/big" $((5 * 1024 * 1024 + 77))
cp "$TMP/big" "$TMP/sts/big"
for i in 1 2 3; do random_file "$TMP/sts/small$i" $((i * 900)); done
umount_vol "$TMP/sts"
mount_vol "$META" "$TMP/sts2"
cmp "$TMP/big" "$TMP/sts2/big" || fail "sts: the file read back differs"
umount_vol "$TMP/sts2"
grep -q "InvalidAccessKeyId\|InvalidToken" "$TMP"/log-sts*.log &&
	fail "sts: the front refused requests of the mounts: $(grep -h Invalid "$TMP"/log-sts*.log | head -3)"
"$GRANARY" gc "$META" -q >"$TMP/gc.out" 2>&1 || fail "sts: gc: $(cat "$TMP/gc.out")"
"$GRANARY" fsck "$META" --deep -q >"$TMP/fsck.out" 2>&1 ||
	fail "sts: fsck: $(cat "$TMP/fsck.out")"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
ok "temporary credentials: the session token goes signed with every request (format, mount.granary's credentials file, gc, fsck), the keys are not kept; without it, refused"
