#!/bin/bash
# t0142-checkpoint-kill.sh - a checkpoint save killed with SIGKILL the
# moment its fsync returned (issue 35: the blocks of a file are put
# without an fsync each, several at once, and made durable by one sync of
# the store before the commit that points at them): after a remount every
# byte that fsync covered reads back, for one rank and for four at once,
# and what a rank wrote after its fsync, if anything of it was committed,
# reads back as written. A save syncs the store once per commit, not once
# per block.
. "$(dirname "$0")/lib.sh"

# kill_client MP: SIGKILL the daemon serving MP (if still there) and clear
# its dead mount.
kill_client() {
	local pids
	pids=$(mount_pids "$1")
	[ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
	fusermount3 -uz "$1" 2>/dev/null || true
	MOUNTS=${MOUNTS/ $1/}
}

# save_and_kill PID SRC:DST[:EXTRA]...: each rank (a thread) writes SRC to
# DST in 1 MiB writes and fsyncs it, then writes EXTRA bytes more of SRC
# (from where it stopped: the start of a next save) without an fsync;
# once every rank's fsync has returned, the daemon PID is killed at once.
save_and_kill() {
	python3 - "$@" <<'EOF_PY'
import os, signal, sys, threading
pid = int(sys.argv[1])
synced = threading.Barrier(len(sys.argv) - 2 + 1)
errors = []
def rank(spec):
    parts = spec.split(":")
    src, dst = parts[0], parts[1]
    extra = int(parts[2]) if len(parts) > 2 else 0
    data = open(src, "rb").read()
    fd = None
    try:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        n = len(data) - extra
        for off in range(0, n, 1 << 20):
            os.write(fd, data[off:min(n, off + (1 << 20))])
        os.fsync(fd)
    except OSError as e:
        errors.append("%s: %s" % (dst, e))
    synced.wait()
    try:  # the next save begins; the kill cuts it short
        for off in () if fd is None else \
                range(len(data) - extra, len(data), 1 << 20):
            os.write(fd, data[off:min(len(data), off + (1 << 20))])
    except OSError:
        pass
threads = [threading.Thread(target=rank, args=(s,)) for s in sys.argv[2:]]
for t in threads:
    t.start()
synced.wait()  # every fsync returned
os.kill(pid, signal.SIGKILL)
for t in threads:
    t.join()
if errors:
    sys.exit("save failed: " + "; ".join(errors))
EOF_PY
}

new_volume kill
A=$TMP/a B=$TMP/b
MB=40
[ "$GRANARY_STORAGE" = s3 ] && MB=16 # s3rver is slow
for r in 0 1 2 3; do random_file "$TMP/rank$r" $((MB << 20)); done
random_file "$TMP/one" $((MB << 20 | 12345))

# the syncs of a save: once per commit (the fsync's, the close's with
# nothing left to commit costs none), not once per block
mount_vol "$META" "$A"
s0=$(stat_of "$A" store syncs) p0=$(stat_of "$A" store puts)
dd if="$TMP/one" of="$A/probe" bs=1M conv=fsync status=none || fail "a save with fsync"
s1=$(stat_of "$A" store syncs) p1=$(stat_of "$A" store puts)
[ $((p1 - p0)) -ge $((MB / 4)) ] || fail "$((p1 - p0)) puts for a save of $MB MiB"
[ $((s1 - s0)) -ge 1 ] && [ $((s1 - s0)) -le 2 ] ||
	fail "$((s1 - s0)) syncs of the store for one save of $((p1 - p0)) blocks"
cmp "$TMP/one" "$A/probe" || fail "the save reads back differently"
ok "a save of $((p1 - p0)) blocks synced the store $((s1 - s0)) time(s)"

# one rank, killed the moment its fsync returned
pid=$(mount_pids "$A")
[ -n "$pid" ] || fail "no daemon found for $A"
save_and_kill "$pid" "$TMP/one:$A/one.pt" || fail "the save before the kill"
kill_client "$A"
mount_vol "$META" "$B"
cmp "$TMP/one" "$B/one.pt" || fail "a save fsync'd before SIGKILL reads back differently"
cmp "$TMP/one" "$B/probe" || fail "the earlier save reads back differently"
umount_vol "$B"
ok "SIGKILL right after fsync: every byte of the save there after a remount"

# four ranks at once, each writing on after its fsync when the kill comes
mount_vol "$META" "$A"
pid=$(mount_pids "$A")
mkdir -p "$A/ckpt"
specs=""
for r in 0 1 2 3; do specs="$specs $TMP/rank$r:$A/ckpt/rank$r.pt:$(((r + 1) << 20))"; done
# shellcheck disable=SC2086 # one word per rank
save_and_kill "$pid" $specs || fail "the ranks' saves before the kill"
kill_client "$A"
mount_vol "$META" "$B"
for r in 0 1 2 3; do
	f=$B/ckpt/rank$r.pt
	synced=$(((MB << 20) - ((r + 1) << 20)))
	len=$(stat -c %s "$f") || fail "rank $r's file is gone"
	[ "$len" -ge "$synced" ] || fail "rank $r: $len bytes after the kill, $synced were fsync'd"
	cmp -n "$len" "$TMP/rank$r" "$f" ||
		fail "rank $r: the $len bytes after the kill are not what it wrote"
done
umount_vol "$B"
ok "4 ranks killed right after their fsyncs: every fsync'd byte there, and what was committed after it as written"
