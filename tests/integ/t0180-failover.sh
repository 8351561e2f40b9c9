#!/bin/bash
# storage: file
# t0180-failover.sh - a volume behind Redis Sentinel (a master, a replica,
# three sentinels, on loopback) in the no-loss mode (?wait=1): the master
# is killed under a mount writing; the sentinels promote the replica; the
# mount goes on on it without a remount: every file closed before the kill
# reads back byte-exact, the file being written then is whole once closed,
# a change no replica has fails (EIO), new writes work once a replica is
# back, and `granary status` names the new master. Wrong master name and
# sentinels that do not answer: one-line errors, exit 1.
. "$(dirname "$0")/lib.sh"
command -v redis-sentinel >/dev/null ||
	fail "redis-sentinel is missing: run tools/install-deps.sh"

R=$TMP/repl
svc_start_redis_tcp "$R/m" || fail "cannot start the master"
MPORT=$SVC_REDIS_PORT MPID=$SVC_REDIS_PID
svc_start_redis_tcp "$R/r" "" --replicaof 127.0.0.1 "$MPORT" ||
	fail "cannot start the replica"
RPORT=$SVC_REDIS_PORT
svc_wait_replica "$RPORT" || fail "the replica did not sync"
svc_start_sentinels "$R/s" 3 vol-m "$MPORT" || fail "cannot start sentinels"
S=$SVC_SENTINEL_HOSTS
URL="redis://vol-m,$S/1?wait=1&wait_timeout=2&failover_timeout=30"

# --- what a wrong URL gets
expect_exit 1 "sentinels of .* know no master named 'nosuch'" \
	"$GRANARY" status "redis://nosuch,$S/1"
DEAD=$(svc_free_port)
expect_exit 1 "no sentinel of .* answered" \
	"$GRANARY" status "redis://vol-m,127.0.0.1:$DEAD,localhost:$DEAD/1"
expect_exit 1 "malformed metadata URL" "$GRANARY" status "redis://vol-m,/1"
ok "a master name the sentinels do not know, and sentinels that do not answer: errors, exit 1"

DATA=$TMP/data
mkdir -p "$DATA"
"$GRANARY" format "$URL" fo --storage "file://$DATA" >"$TMP/format.out" 2>&1 ||
	fail "format through the sentinels: $(cat "$TMP/format.out")"
"$GRANARY" status "$URL" >"$TMP/status.out" 2>&1 ||
	fail "status: $(cat "$TMP/status.out")"
grep -q "127.0.0.1:$MPORT" "$TMP/status.out" ||
	fail "status does not name the master 127.0.0.1:$MPORT: $(cat "$TMP/status.out")"
ok "format and status through the sentinel URL (master 127.0.0.1:$MPORT)"

A=$TMP/a
mount_vol "$URL" "$A"
mkdir "$A/d"
SRC=$TMP/src
mkdir -p "$SRC"
for i in $(seq 1 40); do
	case $((i % 4)) in
	0) n=$((1024 * 1024 + i)) ;;
	*) n=$((4096 * i)) ;;
	esac
	random_file "$SRC/f$i" "$n"
	cp "$SRC/f$i" "$A/d/f$i"
done
random_file "$SRC/big" $((9 * 1024 * 1024))
cp "$SRC/big" "$A/big"
(cd "$SRC" && md5sum f* big) >"$TMP/closed.md5"
ok "41 files written and closed before the kill"

# a file being written across the failover: half of it now, the rest
# after the new master is up; dd's status says whether close and fsync
# succeeded
random_file "$SRC/open1" $((2 * 1024 * 1024))
(
	{
		head -c 1048576 "$SRC/open1"
		while [ ! -e "$TMP/go" ]; do sleep 0.1; done
		tail -c 1048576 "$SRC/open1"
	} |
		dd of="$A/open1" bs=64k iflag=fullblock conv=fsync status=none
	echo $? >"$TMP/open1.rc"
) &
bg_track $!
sleep 0.5

# --- the master dies
kill -9 "$MPID"
t0=$(date +%s)
# reads go on across the failover (they wait for the new master)
(cd "$A/d" && md5sum f*) | sed 's| | |' >"$TMP/during.md5" ||
	fail "reads during the failover failed"
wait_until 30 test "$(svc_sentinel_master vol-m)" = "$RPORT" ||
	fail "the sentinels did not promote the replica (master: $(svc_sentinel_master vol-m))"
ok "the sentinels promoted the replica (127.0.0.1:$RPORT) after $(($(date +%s) - t0)) s"

# the new master has no replica: a change cannot be made safe, so it fails
expect_errno "Input/output error" touch "$A/lonely"
ok "with no replica, a change fails with EIO after wait_timeout (no-loss mode)"

# the old master comes back as a replica of the new one
svc_start_redis_tcp "$R/m2" "$MPORT" --replicaof 127.0.0.1 "$RPORT" ||
	fail "cannot restart the old master as a replica"
svc_wait_replica "$MPORT" || fail "the old master did not sync with the new"

(cd "$SRC" && md5sum -c --quiet "$TMP/closed.md5") >/dev/null
(cd "$A/d" && md5sum -c --quiet <(grep ' f' "$TMP/closed.md5")) ||
	fail "files closed before the kill differ after the failover"
cmp "$SRC/big" "$A/big" || fail "big differs after the failover"
grep -v ' big$' "$TMP/closed.md5" | diff - "$TMP/during.md5" >/dev/null ||
	fail "reads during the failover gave other bytes"
ok "every file closed before the kill reads back byte-exact, during and after the failover"

touch "$TMP/go"
wait_until 30 test -s "$TMP/open1.rc" || fail "the writer did not finish"
check_eq "$(cat "$TMP/open1.rc")" 0 "dd's status (write, fsync, close across the failover)"
cmp "$SRC/open1" "$A/open1" || fail "the file written across the failover differs"
ok "the file open across the failover is whole after its fsync and close"

for i in 1 2 3; do
	random_file "$SRC/new$i" $((300000 * i))
	cp "$SRC/new$i" "$A/new$i" || fail "a write after the failover failed"
done
mkdir "$A/newdir" && mv "$A/new1" "$A/newdir/" || fail "namespace changes after the failover"
cmp "$SRC/new1" "$A/newdir/new1" && cmp "$SRC/new2" "$A/new2" &&
	cmp "$SRC/new3" "$A/new3" || fail "files written after the failover differ"
ok "new files, mkdir and rename work on the new master without a remount"

grep -q "the master of .* is now 127.0.0.1:$RPORT" "$TMP/log-a.log" ||
	fail "the client's log does not name the new master"
"$GRANARY" status "$URL" >"$TMP/status.out" 2>&1 || fail "status after the failover"
grep -q "127.0.0.1:$RPORT" "$TMP/status.out" ||
	fail "status does not name the new master: $(cat "$TMP/status.out")"
ok "the log and granary status name the new master"

umount_vol "$A"
mount_vol "$URL" "$A"
(cd "$A/d" && md5sum -c --quiet <(grep ' f' "$TMP/closed.md5")) ||
	fail "files differ after a remount"
cmp "$SRC/open1" "$A/open1" && cmp "$SRC/new3" "$A/new3" ||
	fail "files differ after a remount"
umount_vol "$A"
ok "a remount on the new master reads the same"
