#!/bin/bash
# locks.sh BUILD_DIR - lock round trips through granary (issue 23).
#
# Two mounts of one volume (file:// pool, Redis on a local socket, both on
# this machine): acquire/release pairs per second through one mount, for
# flock and fcntl locks (build/bench/locks pairs), and the handover
# latency (a lock released through mount A, the waiter through mount B
# gets it; held 30-300 ms, random, each round) over BENCH_LOCKS_ROUNDS
# rounds (100), median and p99. The baseline is
# the same program on a local file in /dev/shm (tmpfs), in the same run.
# Prints a table and writes it to bench/results/locks-DATE.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
ROUNDS=${BENCH_LOCKS_ROUNDS:-100}
SECS=${BENCH_LOCKS_SECONDS:-3}
L=$O/bench/locks

for b in granary bench/locks; do
	[ -x "$O/$b" ] || { say "locks: no $O/$b (make all)"; exit 1; }
done
TMP=$(mktemp -d /var/tmp/granary-locks.XXXXXX)
SHM=$(mktemp -d /dev/shm/granary-locks.XXXXXX)
A=$TMP/a B=$TMP/b
cleanup() {
	for mp in "$A" "$B"; do
		mountpoint -q "$mp" && { "$O/granary" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp"; }
	done
	svc_stop_all
	rm -rf "$TMP" "$SHM"
}
trap cleanup EXIT
svc_start_redis "$TMP/redis" >/dev/null || exit 1
META="$GRANARY_TEST_REDIS?db=1"
mkdir -p "$TMP/data" "$A" "$B"
"$O/granary" format "$META" locks --storage "file://$TMP/data" --force >/dev/null || exit 1
for mp in "$A" "$B"; do
	"$O/granary" mount "$META" "$mp" --log "$TMP/$(basename "$mp").log" || exit 1
done

declare -A R
for kind in flock fcntl; do
	say "locks: $kind pairs on tmpfs and granary, $SECS s each"
	R[local-$kind-pairs]=$(field "$("$L" pairs $kind "$SHM/f" "$SECS")" pairs_per_s)
	R[granary-$kind-pairs]=$(field "$("$L" pairs $kind "$A/f" "$SECS")" pairs_per_s)
	say "locks: $kind handover, $ROUNDS rounds each"
	line=$("$L" handover $kind "$SHM/h" "$SHM/h" "$ROUNDS")
	R[local-$kind-p50]=$(field "$line" p50_ms) R[local-$kind-p99]=$(field "$line" p99_ms)
	line=$("$L" handover $kind "$A/h" "$B/h" "$ROUNDS")
	R[granary-$kind-p50]=$(field "$line" p50_ms) R[granary-$kind-p99]=$(field "$line" p99_ms)
done

mkdir -p "$HERE/results"
out=$HERE/results/locks-$(date -u +%Y-%m-%d-%H%M).md
{
	echo "# Lock round trips ($(date -u +%Y-%m-%d), $(nproc) cores, Redis on a local socket)"
	echo
	echo "bench/locks.sh: pairs over $SECS s through one mount; handover over $ROUNDS rounds,"
	echo "mount A to mount B of one volume (granary) or one file twice (tmpfs); the lock is"
	echo "held 30-300 ms (random) before each release, while the waiter polls (5 ms doubling to 100 ms)."
	echo
	echo "| target | lock | pairs/s | handover p50 ms | handover p99 ms |"
	echo "|---|---|---:|---:|---:|"
	for t in local granary; do
		for kind in flock fcntl; do
			echo "| $([ $t = local ] && echo tmpfs || echo granary) | $kind | ${R[$t-$kind-pairs]} | ${R[$t-$kind-p50]} | ${R[$t-$kind-p99]} |"
		done
	done
} >"$out"
cat "$out"
