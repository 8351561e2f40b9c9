#!/bin/bash
# storage: file
# serial: times a lock hand-over (1 s at most) and a 3 s session TTL
# t0190-locks.sh - flock(2) and fcntl(2) locks hold between two mounts of
# one volume (fs/vfs/lock.c): a lock on one blocks or fails the other,
# a waiter gets the lock soon after its release and can be interrupted,
# ranges conflict only where they overlap, F_GETLK shows the holder, locks
# go with the close, the process and (after the session TTL) a killed
# client; a lock-guarded counter updated from both mounts loses nothing.
. "$(dirname "$0")/lib.sh"

LOCKS="python3 $TOPDIR/tests/integ/locks.py"
# every client of the volume: a dead one's locks go after 3 s, not 60
# (the test build of the client, tests/hooks)
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_SESSION_TTL=3
new_volume locks
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --attr-timeout 0 --entry-timeout 0
mount_vol "$META" "$B" --attr-timeout 0 --entry-timeout 0
ms() { echo $(($(date +%s%N) / 1000000)); }
# busy ARGS...: flock -n ARGS must fail with exit 1 (the lock is held)
busy() {
	local rc=0
	flock -n "$@" true || rc=$?
	check_eq "$rc" 1 "exit of 'flock -n $*' while the lock is held"
}

# --- flock: exclusive on A blocks B until released
: >"$A/lk"
flock -x "$A/lk" -c "touch $TMP/held; sleep 1.5; date +%s%N >$TMP/rel" &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/held" || fail "flock on A did not start"
busy "$B/lk"
busy -s "$B/lk"
t0=$(ms)
flock -x "$B/lk" true || fail "flock -x on B failed"
t1=$(ms)
rel=$(($(cat "$TMP/rel") / 1000000))
[ $((t1 - t0)) -ge 700 ] || fail "flock -x on B did not wait for A (waited $((t1 - t0)) ms)"
[ $((t1 - rel)) -le 1000 ] || fail "B got the lock $((t1 - rel)) ms after A's release (documented: about 100 ms)"
ok "flock -x on A blocks B (-n: exit 1), B gets it $((t1 - rel)) ms after the release"

# shared locks share; a shared holder blocks an exclusive one
flock -s "$A/lk" -c "touch $TMP/held2; sleep 1" &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/held2" || fail "flock -s on A did not start"
flock -n -s "$B/lk" true || fail "a shared flock on B failed next to A's shared one"
busy -x "$B/lk"
wait $bgp
ok "flock -s on both mounts at once; -x fails while one holds -s"

# a blocked waiter ends on SIGINT (the kernel's interrupt)
flock -x "$A/lk" -c "touch $TMP/held3; sleep 3" &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/held3" || fail "flock on A did not start"
t0=$(ms)
rc=0
timeout -s INT 0.5 flock -x "$B/lk" true || rc=$?
t1=$(ms)
[ "$rc" != 0 ] || fail "flock on B got a lock A holds"
[ $((t1 - t0)) -le 2000 ] || fail "a SIGINT took $((t1 - t0)) ms to end a blocked flock"
wait $bgp
flock -n -x "$B/lk" true || fail "the interrupted waiter left a lock behind"
ok "SIGINT ends a blocked flock on B ($((t1 - t0)) ms), leaving no lock"

# --- fcntl record locks
: >"$A/rec"
rm -f "$TMP/go"
touch "$TMP/go"
$LOCKS ops "$A/rec" w:0:100 r:200:100 touch:"$TMP/h1" gone:"$TMP/go" \
	u:40:20 touch:"$TMP/h2" gone:"$TMP/h2" close2 touch:"$TMP/h3" \
	gone:"$TMP/h3" >"$TMP/holder.out" &
hpid=$!
bg_track $hpid
wait_until 10 test -e "$TMP/h1" || fail "the fcntl holder did not start"
out=$($LOCKS ops "$B/rec" w:50:10 w:100:100 r:250:10 w:250:10 w:299:1 \
	w:300:0 g:0:10 g:500:10 | tr '\n' ,)
check_eq "$out" "EAGAIN,ok,ok,EAGAIN,EAGAIN,ok,w 0 100 $hpid,none," \
	"fcntl locks on B against A's [0,100) write and [200,300) read"
ok "fcntl: overlapping ranges fail (EAGAIN), disjoint ones and read-read succeed; F_GETLK shows A's lock and pid"
rm "$TMP/go"
wait_until 10 test -e "$TMP/h2" || fail "the holder did not unlock"
out=$($LOCKS ops "$B/rec" w:45:10 w:30:20 w:60:5 g:0:100 | tr '\n' ,)
check_eq "$out" "ok,EAGAIN,EAGAIN,w 0 40 $hpid," \
	"after A unlocked [40,60) of its [0,100)"
ok "an unlock of the middle of a range splits it"
rm "$TMP/h2"
wait_until 10 test -e "$TMP/h3" || fail "the holder did not close its second fd"
out=$($LOCKS ops "$B/rec" w:0:0 | tr '\n' ,)
check_eq "$out" "ok," "a write lock of the whole file after A closed a second fd"
ok "closing any fd of the file drops the process's POSIX locks"
rm "$TMP/h3"
wait $hpid
# a process's locks go when it exits
$LOCKS ops "$A/rec" w:0:10 >/dev/null
out=$($LOCKS ops "$B/rec" w:0:10 | tr '\n' ,)
check_eq "$out" "ok," "a lock after its holder exited"
# F_SETLKW waits, then gets it
$LOCKS ops "$A/rec" w:0:10 touch:"$TMP/h4" gone:"$TMP/h4" >/dev/null &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/h4" || fail "the holder did not start"
(sleep 0.5; rm "$TMP/h4") &
out=$($LOCKS ops "$B/rec" W:5:1 | tr '\n' ,)
check_eq "$out" "ok," "F_SETLKW on B after A's holder ended"
wait $bgp
ok "a process's POSIX locks go when it exits; F_SETLKW waits for them"

# --- open file description locks (F_OFD_SETLK) end with their open file,
# not with a close of another fd of the process, nor only at its exit
$LOCKS ops "$A/rec" o:0:10 close2 touch:"$TMP/o1" gone:"$TMP/o1" oclose \
	touch:"$TMP/o2" gone:"$TMP/o2" >"$TMP/ofd.out" &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/o1" || fail "the OFD holder did not start"
out=$($LOCKS ops "$B/rec" w:0:10 | tr '\n' ,)
check_eq "$out" "EAGAIN," "B against A's OFD lock, after A closed another fd"
rm "$TMP/o1"
wait_until 10 test -e "$TMP/o2" || fail "the OFD holder did not close"
# the release follows the close asynchronously: allow it a moment
wait_until 5 sh -c "[ \"\$($LOCKS ops '$B/rec' w:0:10)\" = ok ]" ||
	fail "A's OFD lock outlived its open file (still held after the close)"
rm "$TMP/o2"
wait $bgp
check_eq "$(tr '\n' , <"$TMP/ofd.out")" "ok,ok,ok,ok,ok,ok,ok," "the OFD holder's steps"
ok "an open file description's lock holds across another fd's close and ends with its own close"

# --- a lock-guarded counter from 3 processes on each mount: flock (as
# Python's filelock takes it), then POSIX locks (lockf, as SQLite's)
counter() { # HOW N: 6 processes, N increments each
	local pids="" p mp
	echo 0 >"$A/counter"
	: >"$A/counter.lock"
	for mp in "$A" "$B" "$A" "$B" "$A" "$B"; do
		$LOCKS count "$1" "$mp/counter.lock" "$mp/counter" "$2" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || fail "a $1 counter process failed"; done
	check_eq "$(cat "$B/counter")" $((6 * $2)) "the counter after 6 x $2 $1-locked increments"
}
counter flock 30
ok "6 processes on two mounts, 30 flock-locked increments each: 180"
counter lockf 10
ok "6 processes on two mounts, 10 lockf-locked increments each: 60"

# --- read-only mount: shared and exclusive flock locks work there too
R=$TMP/r
mount_vol "$META" "$R" --read-only
flock -x "$R/lk" -c "touch $TMP/held5; sleep 1" &
bgp=$!
bg_track $bgp
wait_until 10 test -e "$TMP/held5" || fail "flock on the read-only mount did not start"
busy -s "$A/lk"
wait $bgp
umount_vol "$R"
ok "a read-only mount takes flock locks that hold against the others"

# --- a killed client's locks go after the session TTL
# (the test's shell holds the flock lock: nothing to outlive the test)
exec 7>>"$A/lk"
flock -x 7 || fail "flock on A failed"
$LOCKS ops "$A/rec" w:0:0 touch:"$TMP/h7" gone:"$TMP/never" >/dev/null &
fpid=$!
bg_track $fpid
wait_until 10 test -e "$TMP/h7" || fail "the fcntl holder on A did not start"
for p in $(mount_pids "$A"); do kill -9 "$p"; done
busy "$B/lk"
t0=$(ms)
flock -w 20 -x "$B/lk" true || fail "B never got the lock of a killed client"
t1=$(ms)
[ $((t1 - t0)) -le 8000 ] || fail "a killed client's lock went after $((t1 - t0)) ms (TTL 3 s)"
out=$($LOCKS ops "$B/rec" w:0:0 | tr '\n' ,)
check_eq "$out" "ok," "a POSIX lock of a killed client after the TTL"
kill $fpid 2>/dev/null || true
exec 7>&-
# the surviving client's cleanup of the dead session drops its lock list
no_lock_lists() { [ -z "$(rcli --scan --pattern 'sl*')" ]; }
wait_until 20 no_lock_lists ||
	fail "the dead session's lock list is still there: $(rcli --scan --pattern 'sl*')"
ok "kill -9 of A's client: B gets its locks after the TTL ($((t1 - t0)) ms); cleanup drops them"
fusermount3 -uz "$A" 2>/dev/null || true
