#!/bin/bash
# t0090-failures.sh - what a user sees when a part fails under a live
# mount: Redis restarted (a pause: calls wait for it, --meta-retry-window;
# with a window of 1 s calls fail with EIO while it is down; the mount
# recovers, nothing closed is lost), Redis busy with a long script or
# stalled for longer than a call's 10 s (pauses too), the store down
# (reads and close fail with EIO, the mount recovers), and a full disk under a file:// pool (close reports ENOSPC,
# files already written stay intact).
. "$(dirname "$0")/lib.sh"

# Our own Redis with an fsync'd AOF, so that it can be restarted.
SVC_REDIS_PERSIST=1 svc_start_redis "$TMP/own-redis" || fail "cannot start redis"
REDIS_PID=$GRANARY_TEST_REDIS_PID
restart_redis() {
	kill "$REDIS_PID"
	wait "$REDIS_PID" 2>/dev/null || true
	# fd 7 (a file open on the mount) must not leak into redis-server
	SVC_REDIS_PERSIST=1 svc_start_redis "$TMP/own-redis" 7>&- || fail "cannot restart redis"
	REDIS_PID=$GRANARY_TEST_REDIS_PID
}
META="unix://$TMP/own-redis/redis.sock?db=1"

case $GRANARY_STORAGE in
file)
	mkdir -p "$TMP/data"
	STORAGE="file://$TMP/data"
	;;
s3)
	# our own s3rver too, so that it can be stopped and started again
	svc_start_s3rver "$TMP/own-s3" granary-test || fail "cannot start s3rver"
	S3_PID=$GRANARY_TEST_S3_PID
	S3_PORT=$GRANARY_TEST_S3_PORT
	STORAGE="s3+http://127.0.0.1:$S3_PORT/granary-test/t0090"
	;;
esac
"$GRANARY" format "$META" fail --storage "$STORAGE" >/dev/null ||
	fail "format failed"
M=$TMP/mnt
mount_vol "$META" "$M" --attr-timeout 0 --entry-timeout 0
random_file "$TMP/keep" 3000000
cp "$TMP/keep" "$M/keep"
ok "volume on a restartable redis"

# --- Redis down and back: a pause for M (the default window, 60 s), EIO
# for M1 (a window of 1 s) once it closes
M1=$TMP/mnt1
mount_vol "$META" "$M1" --attr-timeout 0 --entry-timeout 0 --meta-retry-window 1
kill "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
expect_errno "Input/output error" stat "$M1/keep"
expect_errno "Input/output error" touch "$M1/new-while-down"
(exec 7>&-; stat "$M/keep" >/dev/null && echo during >"$M/while-down") \
	2>"$TMP/pause.err" &
pause_pid=$!
sleep 2
kill -0 "$pause_pid" 2>/dev/null || fail "a call on M did not wait for redis: $(cat "$TMP/pause.err")"
SVC_REDIS_PERSIST=1 svc_start_redis "$TMP/own-redis" || fail "cannot restart redis"
REDIS_PID=$GRANARY_TEST_REDIS_PID
wait "$pause_pid" || fail "calls on M while redis was down: $(cat "$TMP/pause.err")"
check_eq "$(cat "$M/while-down")" during "a file written while redis was down"
wait_until 15 stat "$M1/keep" || fail "M1 did not recover after redis came back"
cmp "$TMP/keep" "$M/keep" || fail "file written before the redis restart differs"
echo after >"$M1/after" && check_eq "$(cat "$M/after")" after "write after restart"
umount_vol "$M1"
ok "redis down: a pause (EIO once a window of 1 s closed), nothing lost"

# --- Redis busy with a script for 3 s (past busy-reply-threshold, it
# answers BUSY to everyone else): a pause too
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" CONFIG SET lua-time-limit 100 >/dev/null
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" EVAL \
	"local t = redis.call('TIME')[1] + 3
	while tonumber(redis.call('TIME')[1]) < t do end" 0 >/dev/null 2>&1 &
busy_pid=$!
wait_until 5 sh -c "redis-cli -s '$GRANARY_TEST_REDIS_SOCK' ping 2>&1 | grep -q BUSY" ||
	fail "redis did not get busy"
random_file "$TMP/busy" 300000
cp "$TMP/busy" "$M/while-busy" 2>"$TMP/busy.err" || fail "a copy while redis was busy: $(cat "$TMP/busy.err")"
wait "$busy_pid"
cmp "$TMP/busy" "$M/while-busy" || fail "the file copied while redis was busy differs"
ok "redis busy: a pause, nothing lost"

# --- Redis stalled for 12 s (CLIENT PAUSE WRITE: it holds every change
# and script), longer than the 10 s a call waited for its answer, under
# creates going on: the create or utimens held when it began waits it out
mkdir "$M/stall"
log_mark=$(wc -l <"$TMP/log-mnt.log")
(for i in $(seq 1 400); do
	touch "$M/stall/f$i" 2>>"$TMP/stall.err" || exit 1
	echo "$i" >"$TMP/stall.n"
done) 7>&- &
stall_pid=$!
wait_until 10 test -s "$TMP/stall.n" || fail "no create went through before the pause"
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" CLIENT PAUSE 12000 WRITE >/dev/null
start=$(date +%s)
wait "$stall_pid" || fail "a create while redis was paused: $(cat "$TMP/stall.err")"
took=$(($(date +%s) - start))
[ "$took" -ge 8 ] || fail "the creates took ${took} s: redis was not paused under them"
check_eq "$(ls "$M/stall" | wc -l)" 400 "files created across the pause"
# nor did the client's own calls fail (the releases of closed files, the
# reclaimer: they did, "lost connection ... Resource temporarily
# unavailable", while a call waited 10 s at most)
if tail -n +"$((log_mark + 1))" "$TMP/log-mnt.log" | grep -E "ERROR|Input/output error"; then
	fail "the mount's calls failed while redis was paused"
fi
ok "redis stalled 12 s under creates: a pause (${took} s), nothing lost"

# --- Redis restarted while a file is open for writing
exec 7>"$M/open-across"
echo first >&7
restart_redis
echo second >&7
exec 7>&-
check_eq "$(tr '\n' ' ' <"$M/open-across")" "first second " "file written across a redis restart"
ok "a file open across a redis restart"

# --- the store down
if [ "$GRANARY_STORAGE" = s3 ]; then
	umount_vol "$M"
	# cold memory cache, and no disk cache (it holds "keep" by now)
	mount_vol "$META" "$M" --attr-timeout 0 --entry-timeout 0 --cache-size 0 \
		--io-retry-window 1 # EIO soon, not after the 120 s default
	kill "$S3_PID"
	wait "$S3_PID" 2>/dev/null || true
	expect_errno "Input/output error" cat "$M/keep"
	# (a shell's "echo > file" ignores close's error: dd checks fsync's)
	expect_errno "Input/output error" dd if="$TMP/keep" of="$M/store-down" bs=64k conv=fsync status=none
	ls "$M" >/dev/null || fail "the mount died while the store was down"
	# started again as svc_start_s3rver started it (lenient)
	"$TOPDIR/.deps/node_modules/.bin/s3rver" -d "$TMP/own-s3/data" -a 127.0.0.1 \
		-p "$S3_PORT" --silent --configure-bucket granary-test \
		--allow-mismatched-signatures >"$TMP/own-s3/s3rver2.log" 2>&1 &
	S3_PID=$!
	SVC_PIDS="$SVC_PIDS $S3_PID"
	wait_until 20 cmp -s "$TMP/keep" "$M/keep" || fail "reads did not recover after the store came back"
	echo data >"$M/store-back" || fail "write after the store came back"
	ok "store down: EIO, then the mount recovers"
fi

# --- a full disk under a file:// pool
if [ "$GRANARY_STORAGE" = file ]; then
	umount_vol "$M"
	mkdir -p "$TMP/small"
	mount -t tmpfs -o size=6m granary-test "$TMP/small" || fail "cannot mount a tmpfs"
	SMALL=$TMP/small
	"$GRANARY" format "unix://$TMP/own-redis/redis.sock?db=2" full \
		--storage "file://$SMALL" --compress none >/dev/null || fail "format on tmpfs"
	mount_vol "unix://$TMP/own-redis/redis.sock?db=2" "$M"
	random_file "$TMP/small1" 1000000
	cp "$TMP/small1" "$M/small1"
	expect_errno "No space left on device" dd if=/dev/urandom of="$M/huge" bs=1M count=12 conv=fsync status=none
	cmp "$TMP/small1" "$M/small1" || fail "a file written before the disk filled differs"
	ls "$M" >/dev/null || fail "the mount died on a full disk"
	umount_vol "$M"
	umount "$SMALL"
	ok "full disk: ENOSPC, earlier files intact"
fi
