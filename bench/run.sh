#!/bin/bash
# run.sh BUILD_DIR - quick baseline benchmark: the same workloads on the
# local disk and on a granary mount (file:// pool on the same disk, Redis on
# a unix socket), in one run, printed as a markdown table with ratios.
# Workloads: sequential write with fsync, cold sequential read, small-file
# ingest and small-file read. Sizes: BENCH_MB (default 512), BENCH_FILES
# (default 2000 files of 128 KiB).
set -eu
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
G="$ROOT/$O/granary"
MB=${BENCH_MB:-512}
NF=${BENCH_FILES:-2000}
. "$ROOT/tests/lib/services.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-bench.XXXXXX")
MP="$TMP/mnt"
cleanup() {
	"$G" umount "$MP" >/dev/null 2>&1 || fusermount3 -uz "$MP" 2>/dev/null || true
	svc_stop_all
	rm -rf "$TMP"
}
trap cleanup EXIT
svc_start_redis "$TMP/redis" >/dev/null
META="$GRANARY_TEST_REDIS?db=1"
"$G" format "$META" bench --storage "file://$TMP/data" >/dev/null
mkdir -p "$MP" "$TMP/local"
"$G" mount "$META" "$MP" --log "$TMP/granary.log" --cache-dir "$TMP/cache"

drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
now() { date +%s.%N; }
rate() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", n / (b - a) }'; }

seqwrite() { # DIR -> MiB/s
	local t0 t1
	t0=$(now); dd if=/dev/urandom of="$1/big" bs=1M count="$MB" conv=fsync status=none; t1=$(now)
	rate "$t0" "$t1" "$MB"
}
seqread() {
	local t0 t1
	drop; t0=$(now); dd if="$1/big" of=/dev/null bs=1M status=none; t1=$(now)
	rate "$t0" "$t1" "$MB"
}
ingest() { # DIR -> files/s (4 writers)
	local t0 t1
	head -c 131072 /dev/urandom > "$TMP/one"
	t0=$(now)
	for w in 0 1 2 3; do
		( mkdir -p "$1/ds/$w"; for i in $(seq 1 $((NF / 4))); do cp "$TMP/one" "$1/ds/$w/$i.jpg"; done ) &
	done
	wait; sync; t1=$(now)
	rate "$t0" "$t1" "$NF"
}
readsmall() {
	local t0 t1
	drop; t0=$(now)
	find "$1/ds" -type f | shuf | xargs -P 4 -n 64 cat > /dev/null
	t1=$(now)
	rate "$t0" "$t1" "$NF"
}

printf 'running: sequential %s MiB, %s small files of 128 KiB ...\n' "$MB" "$NF" >&2
lw=$(seqwrite "$TMP/local"); gw=$(seqwrite "$MP")
lr=$(seqread "$TMP/local"); gr=$(seqread "$MP")
li=$(ingest "$TMP/local"); gi=$(ingest "$MP")
ls_=$(readsmall "$TMP/local"); gs=$(readsmall "$MP")

ratio() { awk -v g="$1" -v l="$2" 'BEGIN { printf "%.2fx", g / l }'; }
mkdir -p "$ROOT/bench/results"
{
echo "| workload | local disk | granary (file://) | ratio |"
echo "|---|---|---|---|"
echo "| sequential write + fsync, MiB/s | $lw | $gw | $(ratio "$gw" "$lw") |"
echo "| cold sequential read, MiB/s | $lr | $gr | $(ratio "$gr" "$lr") |"
echo "| small-file ingest (4 writers), files/s | $li | $gi | $(ratio "$gi" "$li") |"
echo "| small-file shuffled read (4 readers), files/s | $ls_ | $gs | $(ratio "$gs" "$ls_") |"
} | tee "$ROOT/bench/results/baseline.md"
