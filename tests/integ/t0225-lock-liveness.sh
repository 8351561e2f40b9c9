#!/bin/bash
# storage: file
# t0225-lock-liveness.sh - locks neither outlive what holds them nor are
# taken from a live holder (fs/vfs/lock.c, meta/redis_lock.c, the
# liveness rule of meta/lua/lib/lock.lua): an unlock whose connection
# drops is delivered all the same, and a lock whose reply is lost is the
# caller's (a proxy between one mount and Redis loses them); a Redis
# stalled for longer than the session TTL (CLIENT PAUSE) does not hand a
# live holder's lock to a waiter; a killed client shows as stale in
# `granary status` soon after the TTL and is cleaned up soon after that.
. "$(dirname "$0")/lib.sh"

LOCKS="python3 $TOPDIR/tests/integ/locks.py"
# every client of the volume takes a 3 s session TTL (tests/hooks); so
# does status, run from the same binary
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_SESSION_TTL=3

# a Redis of this test's own, on TCP: a proxy goes in front of it, and a
# CLIENT PAUSE stops no other test's
svc_start_redis_tcp "$TMP/redis" || fail "cannot start redis"
RPORT=$SVC_REDIS_PORT
DIRECT=redis://127.0.0.1:$RPORT/1
"$GRANARY" format "$DIRECT" lv --storage "file://$TMP/data" --trash-days 0 \
	>"$TMP/format.out" 2>&1 || fail "format: $(cat "$TMP/format.out")"

# start_proxy RULE [PORT]: a redisproxy.py in front of the test's Redis;
# sets PROXY (the volume's URL through it) and PROXY_OUT (what it printed)
start_proxy() {
	rm -f "$TMP/proxy.port"
	PROXY_OUT=$TMP/proxy-$1.out
	python3 "$TOPDIR/tests/integ/redisproxy.py" "$TMP/proxy.port" "$RPORT" \
		"$1" ${2:-} >"$PROXY_OUT" 2>&1 &
	PROXY_PID=$!
	bg_track $PROXY_PID
	wait_until 10 test -s "$TMP/proxy.port" || fail "the proxy did not start"
	PROXY=redis://127.0.0.1:$(cat "$TMP/proxy.port")/1
}
stop_proxy() {
	kill "$PROXY_PID" 2>/dev/null || true
	wait "$PROXY_PID" 2>/dev/null || true
}

B=$TMP/b
mount_vol "$DIRECT" "$B" --attr-timeout 0 --entry-timeout 0

# --- (a) an unlock lost with its connection is sent again
start_proxy drop-unlock
A=$TMP/a1
mount_vol "$PROXY" "$A" --attr-timeout 0 --entry-timeout 0
: >"$A/lk"
flock -x "$A/lk" true || fail "flock on A failed"
wait_until 10 grep -q "dropped unlock" "$PROXY_OUT" ||
	fail "the proxy lost no unlock (nothing was tested)"
wait_until 15 flock -n -x "$B/lk" true ||
	fail "an unlock lost with its connection left A's lock held: B is still refused 15 s later"
ok "an unlock whose connection dropped is delivered: the other mount gets the lock"
umount_vol "$A"
stop_proxy

# --- (a) a lock granted whose reply is lost is the caller's
start_proxy drop-lock-reply
A=$TMP/a2
mount_vol "$PROXY" "$A" --attr-timeout 0 --entry-timeout 0
: >"$A/rec"
$LOCKS ops "$A/rec" w:0:0 touch:"$TMP/r1" gone:"$TMP/r1" >"$TMP/rec.out" &
rpid=$!
bg_track $rpid
wait_until 10 test -e "$TMP/r1" || fail "the fcntl holder on A did not get to its lock"
grep -q "dropped lock reply" "$PROXY_OUT" ||
	fail "the proxy lost no lock reply (nothing was tested)"
check_eq "$(head -n 1 "$TMP/rec.out")" ok \
	"A's F_SETLK whose reply the proxy lost (granted in Redis)"
check_eq "$($LOCKS ops "$B/rec" w:0:0)" EAGAIN "B's F_SETLK while A holds the lock"
rm "$TMP/r1"
wait $rpid
wait_until 10 sh -c "[ \"\$($LOCKS ops '$B/rec' w:0:0)\" = ok ]" ||
	fail "A's lock outlived its holder"
ok "a lock whose reply was lost is granted to its caller (not EIO), and goes with it"
umount_vol "$A"
stop_proxy

# --- (a) an unlock while Redis cannot be reached at all is queued, and
# delivered by a heartbeat once it can (once the retry window closed: the
# default 60 s rides out a restart; none here, so that A is away for less
# than the test's session TTL of 3 s, as a real Redis outage is for 60 s)
start_proxy none
A=$TMP/a4
mount_vol "$PROXY" "$A" --attr-timeout 0 --entry-timeout 0 --meta-retry-window 0
port=${PROXY##*:}
port=${port%%/*}
: >"$A/q"
flock -x "$A/q" -c "touch $TMP/qheld; while [ -e $TMP/qheld ]; do sleep 0.05; done" &
qpid=$!
bg_track $qpid
wait_until 10 test -e "$TMP/qheld" || fail "flock on A did not start"
# B away too while A is: no live client finds A's session dead meanwhile
# (its TTL is 3 s, and a loaded machine took longer than that to start
# the proxy again and beat once more); B comes back once A's heartbeat did
umount_vol "$B"
stop_proxy # A reaches Redis no more
rm "$TMP/qheld"
wait $qpid
wait_until 10 grep -q "cannot deliver the unlock" "$TMP/log-a4.log" ||
	fail "A did not queue its unlock: $(tail -n 5 "$TMP/log-a4.log")"
start_proxy none "$port"
wait_until 15 grep -q "queued unlocks were delivered" "$TMP/log-a4.log" ||
	fail "A's log does not say the queued unlock was delivered"
mount_vol "$DIRECT" "$B" --attr-timeout 0 --entry-timeout 0
wait_until 15 flock -n -x "$B/q" true ||
	fail "an unlock queued while Redis was away was never delivered: B is still refused"
grep -q "was found dead\|expired by another" "$TMP/log-a4.log" &&
	fail "A's session expired: the lock went with it, not with the queued unlock"
ok "an unlock made while Redis was away is queued and delivered by the heartbeat"
umount_vol "$A"
stop_proxy

# --- (b) a Redis paused for twice the TTL: the holder keeps its lock
A=$TMP/a3
mount_vol "$DIRECT" "$A" --attr-timeout 0 --entry-timeout 0
: >"$A/p"
: >"$TMP/order"
flock -x "$A/p" -c "echo A-in >>$TMP/order; touch $TMP/pheld; sleep 10; echo A-out >>$TMP/order" &
apid=$!
bg_track $apid
wait_until 10 test -e "$TMP/pheld" || fail "flock on A did not start"
flock -x "$B/p" -c "echo B-in >>$TMP/order; echo B-out >>$TMP/order" &
bpid=$!
bg_track $bpid
sleep 1 # B polls for the lock
redis-cli -p "$RPORT" client pause 6000 ALL >/dev/null || fail "client pause failed"
wait $apid || fail "A's flock failed"
wait $bpid || fail "B's flock failed"
check_eq "$(tr '\n' ' ' <"$TMP/order")" "A-in A-out B-in B-out " \
	"the order of the holders of one flock across a 6 s pause (TTL 3 s)"
grep -q "no script of a client for" "$TMP/log-a3.log" ||
	fail "A's log does not tell of the stall: $(tail -n 5 "$TMP/log-a3.log")"
ok "a 6 s CLIENT PAUSE (TTL 3 s) does not give a waiter the lock of a live holder"

# --- (c) a killed client: stale in status soon after the TTL, then
# cleaned up. Status judges with a TTL of 1 s where B, the client left to
# clean A up, uses 8 s, so that the session is seen stale before it is
# cleaned (with 3 s, a status that took a second or two on a loaded
# machine missed the window); B waits for A's lock meanwhile (its polls
# keep the liveness clock going).
umount_vol "$B"
GRANARY_TEST_SESSION_TTL=8 mount_vol "$DIRECT" "$B" --attr-timeout 0 --entry-timeout 0
sid_of() { # MP: "SID live|stale" of the mount at MP, from status --json
	GRANARY_TEST_SESSION_TTL=1 "$GRANARY" status "$DIRECT" --json 2>/dev/null |
		python3 -c '
import json, sys
for s in json.load(sys.stdin)["sessions"]:
    if s["mountpoint"] == sys.argv[1]:
        print(s["sid"], "stale" if s["stale"] else "live")' "$1"
}
state=$(sid_of "$A")
[ "${state#* }" = live ] || fail "A's session before the kill: '$state'"
sid=${state%% *}
exec 8>>"$A/k"
flock -x 8 || fail "flock on A failed"
for p in $(mount_pids "$A"); do kill -9 "$p"; done
t0=$(date +%s%N)
flock -w 30 -x "$B/k" true &
wpid=$!
bg_track $wpid
seen=""
for _ in $(seq 1 200); do
	state=$(sid_of "$A")
	[ "$state" = "$sid stale" ] && { seen=1; break; }
	[ -n "$state" ] || break
	sleep 0.05
done
t1=$(date +%s%N)
[ -n "$seen" ] ||
	fail "A's session was never shown stale (now: '$state', $(((t1 - t0) / 1000000)) ms after the kill; status TTL 1 s)"
[ $(((t1 - t0) / 1000000)) -le 10000 ] ||
	fail "A's session was shown stale only $(((t1 - t0) / 1000000)) ms after the kill (status TTL 1 s)"
gone() { [ -z "$(sid_of "$A")" ]; }
wait_until 30 gone || fail "A's session is still listed 30 s after it went stale: $(sid_of "$A")"
t2=$(date +%s%N)
wait $wpid || fail "B never got the lock of the killed client"
exec 8>&-
ok "a killed client is stale in status after $(((t1 - t0) / 1000000)) ms (TTL 1 s there) and cleaned up after $(((t2 - t0) / 1000000)) ms (B's TTL 8 s)"
fusermount3 -uz "$A" 2>/dev/null || true
