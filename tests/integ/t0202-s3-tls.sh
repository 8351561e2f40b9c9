#!/bin/bash
# storage: s3
# t0202-s3-tls.sh - s3:// is HTTPS done right: through a TLS front
# (stunnel4, a certificate for 127.0.0.1 from a CA made by the test) a
# volume formats, mounts and reads back byte-exact when the CA is given
# (GRANARY_S3_CA_BUNDLE); without it the certificate is not trusted, for
# another host name it does not match, and each is refused at once with
# its message; GRANARY_S3_INSECURE_TLS=1 works and says loudly that it is
# unsafe. Each failure of the connection names its cause: a plain-HTTP
# server behind s3:// (try s3+http://), a name that does not resolve, a
# refused connection, a server that never answers.
. "$(dirname "$0")/lib.sh"

if [ "$GRANARY_STORAGE" != s3 ]; then
	skip "TLS needs s3rver (GRANARY_STORAGE=s3)"
	exit 0
fi
need_redis
need_s3
svc_start_tls "$TMP/tls" "$GRANARY_TEST_S3_PORT" || fail "cannot start the TLS front"
TLS=s3://127.0.0.1:$GRANARY_TEST_TLS_PORT/granary-test
CA=$GRANARY_TEST_TLS_CA
unset GRANARY_S3_CA_BUNDLE GRANARY_S3_INSECURE_TLS

# fmt NAME URL: granary format of a fresh database onto URL; its output in
# $TMP/NAME.out, its exit code returned, its time in seconds in $SECS.
fmt() {
	local name=$1 url=$2 db t0 rc
	db=$(next_db)
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	META="$GRANARY_TEST_REDIS?db=$db"
	t0=$(date +%s.%N)
	"$GRANARY" format "$META" "$name" --storage "$url" >"$TMP/$name.out" 2>&1
	rc=$?
	SECS=$(echo "$(date +%s.%N) - $t0" | bc)
	return $rc
}
# refused NAME WANT: the format failed, with WANT in its output
refused() {
	grep -qi -- "$2" "$TMP/$1.out" ||
		fail "$1: the message does not say '$2': $(cat "$TMP/$1.out")"
}
quick() { # NAME: it took less than 10 s (the window is 30 s)
	[ "$(echo "$SECS < 10" | bc)" = 1 ] ||
		fail "$1: took $SECS s: retried an error no retry cures"
}

# --- verified: the CA given
export GRANARY_S3_CA_BUNDLE=$CA
fmt tlsvol "$TLS/t0202-$$" || fail "format over TLS with the CA failed: $(cat "$TMP/tlsvol.out")"
M=$TMP/mnt
mount_vol "$META" "$M"
random_file "$TMP/big" $((9 << 20))
cp "$TMP/big" "$M/big"
for i in $(seq 1 20); do echo "small $i" >"$M/s$i"; done
umount_vol "$M"
rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M"
cmp "$TMP/big" "$M/big" || fail "the big file reads back other bytes over TLS"
[ "$(cat "$M/s7")" = "small 7" ] || fail "a small file reads back other bytes over TLS"
umount_vol "$M"
ok "verified TLS: format, mount, write, cold read byte-exact"

# permanent errors fail at once, whatever the retry window
export GRANARY_IO_RETRY_WINDOW=30

# --- another host name than the certificate's
! fmt wrongname "s3://localhost:$GRANARY_TEST_TLS_PORT/granary-test/t0202-n$$" ||
	fail "format accepted a certificate made for another name"
refused wrongname "certificate is not trusted"
refused wrongname "localhost"
quick wrongname
ok "a certificate for another name: refused at once, naming the host"

# --- the CA not given: not trusted
unset GRANARY_S3_CA_BUNDLE
! fmt untrusted "$TLS/t0202-u$$" || fail "format trusted a certificate of an unknown CA"
refused untrusted "certificate is not trusted"
refused untrusted "GRANARY_S3_CA_BUNDLE"
quick untrusted
ok "a certificate of an unknown CA: refused at once, with the hint"

# --- a CA bundle that is not there
GRANARY_S3_CA_BUNDLE=$TMP/no-such-ca.pem fmt noca "$TLS/t0202-c$$" &&
	fail "format went on with a CA bundle that does not exist"
refused noca "no-such-ca.pem"
ok "a missing CA bundle is named"

# --- the loud opt-out
GRANARY_S3_INSECURE_TLS=1 fmt insecure "$TLS/t0202-i$$" ||
	fail "format with GRANARY_S3_INSECURE_TLS=1 failed: $(cat "$TMP/insecure.out")"
refused insecure "certificate checks are OFF"
ok "GRANARY_S3_INSECURE_TLS=1: works, and warns"

# --- s3:// at a server that speaks plain HTTP
! fmt plain "s3://127.0.0.1:$GRANARY_TEST_S3_PORT/granary-test/t0202-p$$" ||
	fail "format over TLS to a plain-HTTP server succeeded"
refused plain "plain HTTP"
refused plain "s3+http://"
quick plain
ok "s3:// at a plain-HTTP server: says so, suggests s3+http://"

# transient errors retry for the window: keep it short here
export GRANARY_IO_RETRY_WINDOW=1

# --- a host name that does not resolve
! fmt nodns "s3://no-such-host.invalid/granary-test/t0202" ||
	fail "format to a host that does not exist succeeded"
refused nodns "host name was not found"
ok "an unknown host name: named as such"

# --- nothing listening
port=$(svc_free_port)
! fmt closed "s3+http://127.0.0.1:$port/granary-test/t0202" ||
	fail "format to a closed port succeeded"
refused closed "refused the connection"
ok "a closed port: connection refused"

# --- a server that accepts and never answers
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$TMP/mute.port" &
MUTE=$!
bg_track "$MUTE"
wait_until 5 test -s "$TMP/mute.port" || fail "the mute server did not start"
GRANARY_S3_TIMEOUT=1 fmt mute "s3+http://127.0.0.1:$(cat "$TMP/mute.port")/granary-test/t0202" &&
	fail "format to a server that never answers succeeded"
refused mute "did not answer in time"
kill "$MUTE" 2>/dev/null
ok "a server that never answers: timed out"
