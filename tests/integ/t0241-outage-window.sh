#!/bin/bash
# t0241-outage-window.sh - a store outage longer than the retry window
# fails a read within about the window (plus one request's deadline),
# however many layers and kernel retries ask for the same bytes: the
# window belongs to the outage, not to each request (issue 32 saw reads
# fail after 2 to 4 windows). Each request given up is logged once, with
# its own figures. The outage is s3rver stopped (SIGSTOP: requests hang
# until their deadline) and then killed (connections refused). s3 only.
. "$(dirname "$0")/lib.sh"

if [ "$GRANARY_STORAGE" != s3 ]; then
	skip "store outages need s3rver (GRANARY_STORAGE=s3)"
	exit 0
fi

svc_start_s3rver "$TMP/own-s3" granary-test || fail "cannot start s3rver"
S3_PID=$GRANARY_TEST_S3_PID
trap 'rc=$?; set +e; kill -CONT "$S3_PID" 2>/dev/null || true; (exit $rc); cleanup' EXIT
new_volume window # on our s3rver

WINDOW=6
# A writes the files; B, with a cold disk cache of its own, reads them
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
random_file "$TMP/small" 50000
random_file "$TMP/big" $((24 << 20))
cp "$TMP/small" "$A/small"
cp "$TMP/big" "$A/big"
cp "$TMP/small" "$A/small2"
cp "$TMP/big" "$A/big2"
umount_vol "$A"
export GRANARY_S3_TIMEOUT=2
mount_vol "$META" "$B" --io-retry-window $WINDOW
unset GRANARY_S3_TIMEOUT
ls -l "$B" >/dev/null

# read_fails WHAT FILE: cat of FILE fails with EIO within the window plus
# one request's deadline and slack (14 s for 6 + 2): the old code took 2
# to 4 windows
read_fails() {
	local what=$1 file=$2 t0 ms
	t0=$(date +%s%N)
	expect_errno "Input/output error" cat "$file"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ms" -lt 14000 ] ||
		fail "$what: the read failed after $ms ms, window ${WINDOW} s"
	echo "  # $what: failed after $ms ms"
}

# each request given up: one line, with the real window
gave_up_lines() {
	grep -cE "gave up after|failed at once" "$TMP/log-b.log" || true
}
# counts_agree: the lines logged and the counter agree. A request that
# fetches ahead can still be giving up after cat has failed (the counter
# moves just before its line is written), so the caller waits for the two
# to settle.
counts_agree() {
	n=$(gave_up_lines)
	gave=$("$GRANARY" stats "$B" --json | jq .store.gave_up)
	[ "$n" = "$gave" ]
}
check_log() {
	local n gave
	! grep -q "retry window 0 s" "$TMP/log-b.log" ||
		fail "a give-up logged with 'retry window 0 s': $(grep "retry window 0 s" "$TMP/log-b.log" | head -2)"
	wait_until 10 counts_agree || counts_agree
	[ "$n" -ge 1 ] || fail "no give-up logged"
	check_eq "$n" "$gave" "give-up lines in the log (store.gave_up)"
	grep -E "gave up after|failed at once" "$TMP/log-b.log" | grep -vq "retry window $WINDOW s" &&
		fail "a give-up line with another window: $(grep -E "gave up after|failed at once" "$TMP/log-b.log" | grep -v "retry window $WINDOW s" | head -1)"
	return 0
}

# --- a gateway that accepts connections and never answers
kill -STOP "$S3_PID"
read_fails "small file, silent store" "$B/small"
read_fails "big file, silent store" "$B/big"
check_log
ok "a silent store: reads of a small and a big file fail within the window, each give-up logged once"

kill -CONT "$S3_PID"
wait_until 15 cmp -s "$TMP/small" "$B/small" ||
	fail "the small file does not read back once the store answers"
cmp "$TMP/big" "$B/big" || fail "the big file reads other bytes once the store answers"
ok "the store answers again: both files read back"

# --- the server gone: connections refused, each attempt fails at once
kill "$S3_PID"
wait "$S3_PID" 2>/dev/null || true
read_fails "small file, store gone" "$B/small2"
read_fails "big file, store gone" "$B/big2"
check_log
ok "a store that is gone: reads fail within the window, each give-up logged once"
umount_vol "$B"
