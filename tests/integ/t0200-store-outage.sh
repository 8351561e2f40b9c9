#!/bin/bash
# t0200-store-outage.sh - a store outage shorter than the retry window is
# a pause, not an error: a training-epoch-like read and a checkpoint save
# (dd conv=fsync) both finish, byte-exact, through a gateway that stops
# answering for 20 s (SIGSTOP) and through a real stop and start of the
# server on the same port and data. Errors no retry can cure (a bucket
# that does not exist) fail at once, whatever the window. s3 only.
. "$(dirname "$0")/lib.sh"

if [ "$GRANARY_STORAGE" != s3 ]; then
	skip "store outages need s3rver (GRANARY_STORAGE=s3)"
	exit 0
fi

# our own s3rver, so that it can be stopped and started again; a stopped
# one is let go on the way out (a SIGTERM waits while it is stopped)
svc_start_s3rver "$TMP/own-s3" granary-test || fail "cannot start s3rver"
S3_PID=$GRANARY_TEST_S3_PID
S3_PORT=$GRANARY_TEST_S3_PORT
trap 'rc=$?; set +e; kill -CONT "$S3_PID" 2>/dev/null; (exit $rc); cleanup' EXIT
new_volume outage # on our s3rver: svc_start_s3rver set GRANARY_TEST_S3

M=$TMP/mnt
# no disk cache: every read of a cold file goes to the store
MOPTS=(--io-retry-window 60 --cache-size 0)
mount_vol "$META" "$M" "${MOPTS[@]}"
for i in 1 2 3; do
	random_file "$TMP/shard$i" 12000000
	cp "$TMP/shard$i" "$M/shard$i"
done
random_file "$TMP/ckpt" $((200 << 20))
sync "$M"
# remount: a cold memory cache
umount_vol "$M"
mount_vol "$META" "$M" "${MOPTS[@]}"

# outage_run WHAT: an epoch (cat of the shards) and a checkpoint save
# running while the store is away; then both must succeed, byte-exact.
epoch_and_save() {
	local tag=$1
	(cat "$M/shard1" "$M/shard2" "$M/shard3" >"$TMP/epoch-$tag") &
	EPOCH=$!
	(dd if="$TMP/ckpt" of="$M/ckpt-$tag" bs=1M conv=fsync status=none) &
	SAVE=$!
	sleep 0.5
}
epoch_and_save_done() {
	local tag=$1
	wait "$EPOCH" || fail "$tag: the epoch's read failed"
	wait "$SAVE" || fail "$tag: the checkpoint save failed"
	cat "$TMP/shard1" "$TMP/shard2" "$TMP/shard3" | cmp - "$TMP/epoch-$tag" ||
		fail "$tag: the epoch read other bytes"
	cmp "$TMP/ckpt" "$M/ckpt-$tag" || fail "$tag: the checkpoint reads back other bytes"
}

# --- a gateway that stops answering for 20 s
t0=$(date +%s)
epoch_and_save stop
kill -STOP "$S3_PID"
sleep 20
kill -CONT "$S3_PID"
epoch_and_save_done stop
t1=$(date +%s)
[ $((t1 - t0)) -ge 20 ] || fail "done in $((t1 - t0)) s: the outage did not happen under the I/O"
stats=$("$GRANARY" stats "$M" --json)
retries=$(echo "$stats" | jq .store.retries)
[ "$retries" -gt 0 ] || fail "no retries counted: $stats"
check_eq "$(echo "$stats" | jq .store.gave_up)" 0 "requests given up"
grep -q "retrying for up to 60 s" "$TMP/log-mnt.log" ||
	fail "no log line of the outage: $(tail -5 "$TMP/log-mnt.log")"
ok "gateway silent 20 s (SIGSTOP) under an epoch and a checkpoint save: both finish byte-exact ($retries retries)"

# --- the server stopped and started again on the same port and data
umount_vol "$M"
mount_vol "$META" "$M" "${MOPTS[@]}"
epoch_and_save restart
kill "$S3_PID"
wait "$S3_PID" 2>/dev/null || true
sleep 8
# started again as svc_start_s3rver started it (lenient)
"$TOPDIR/.deps/node_modules/.bin/s3rver" -d "$TMP/own-s3/data" -a 127.0.0.1 \
	-p "$S3_PORT" --silent --configure-bucket granary-test \
	--allow-mismatched-signatures >"$TMP/own-s3/s3rver2.log" 2>&1 &
S3_PID=$!
SVC_PIDS="$SVC_PIDS $S3_PID"
epoch_and_save_done restart
ok "server stopped 8 s and started again: epoch and checkpoint save finish byte-exact"

# --- what no retry cures fails at once, even with a long window
# a db of its own, emptied: next_db wraps over the dbs of finished tests
nob_db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$nob_db" flushdb >/dev/null
t0=$(date +%s%N)
GRANARY_IO_RETRY_WINDOW=60 expect_exit 1 "bucket" "$GRANARY" format \
	"$GRANARY_TEST_REDIS?db=$nob_db" nob \
	--storage "s3+http://127.0.0.1:$S3_PORT/no-such-bucket-$$/x"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 5000 ] || fail "a missing bucket took $ms ms to fail with a 60 s window"
ok "a missing bucket fails at once with a 60 s window (${ms} ms)"
umount_vol "$M"
