#!/bin/bash
# s3sig.sh [BUILD_DIR] - what the signature costs: the same workloads on
# s3rver signed with V4 (the default) and with V2 (?sig=v2), in one run,
# rounds interleaved (V4, V2, V4, V2, ...) so that drift of the machine
# hits both alike; each figure is the median over the rounds of the
# per-round ratio V4 / V2. Workloads: ingest of BENCH_S3SIG_FILES files of
# 64 KiB (4 writers), a cold epoch over them (4 readers, shuffled, fresh
# disk cache, page cache dropped), a checkpoint save of one
# BENCH_S3SIG_CKPT_MIB file (written and fsync'd) and its cold read.
# With BENCH_S3SIG_BASE=/path/to/older/granary (e.g. main's libs3 build)
# that binary runs a third row each round, on the URL without options.
# Writes bench/results/s3sig-DATE.md; starts its own Redis and s3rver and
# stops and unmounts all it started on exit.
#
# Env: BENCH_S3SIG_ROUNDS (3), BENCH_S3SIG_FILES (2000),
# BENCH_S3SIG_CKPT_MIB (1024), BENCH_S3SIG_BASE, BENCH_DIR (/var/tmp),
# BENCH_OUT.
set -eu -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $O in /*) ;; *) O=$ROOT/$O ;; esac
G=$O/granary RD=$O/bench/readers
R=${BENCH_S3SIG_ROUNDS:-3} N=${BENCH_S3SIG_FILES:-2000}
CK=${BENCH_S3SIG_CKPT_MIB:-1024} BASE=${BENCH_S3SIG_BASE:-}
OUT=${BENCH_OUT:-$ROOT/bench/results}
for b in "$G" "$RD" ${BASE:+"$BASE"}; do
	[ -x "$b" ] || { echo "s3sig: '$b' is missing (make all)" >&2; exit 1; }
done

. "$ROOT/tests/lib/services.sh"
. "$ROOT/bench/lib.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-s3sig.XXXXXX")
RES=$TMP/res
MOUNTS=""
cleanup() { mounts_cleanup s3sig; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RES"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

say "s3sig: $R rounds; $N files of 64 KiB, a $CK MiB checkpoint ..."
svc_start_redis "$TMP/redis" >/dev/null
svc_start_s3rver "$TMP/s3" granary >/dev/null
mkdir -p "$TMP/src/d"
head -c $((N * 65536)) /dev/urandom | split -a 5 -d -b 65536 - "$TMP/src/d/f"
(cd "$TMP/src" && find d -type f | sort) >"$TMP/list"
head -c $((CK << 20)) /dev/urandom >"$TMP/ckpt"

# one ID ROUND BINARY URL_SUFFIX: the four workloads of one variant, on a
# database of its own
DBN=0
one() {
	local id=$1 r=$2 bin=$3 sfx=$4 db mp t0 t1 vol
	DBN=$((DBN + 1)) db=$((DBN % 15 + 1))
	vol=$id-r$r
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	"$bin" format "$GRANARY_TEST_REDIS?db=$db" "s3sig-$vol" --trash-days 0 \
		--storage "$GRANARY_TEST_S3/granary/$vol$sfx" >/dev/null 2>&1
	mp=$TMP/mnt-$vol
	mkdir -p "$mp"
	MOUNTS="$MOUNTS $mp"
	"$bin" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$vol-w.log" \
		--cache-dir "$TMP/cache-$vol-w" 2>/dev/null
	t0=$(now)
	"$RD" -t 4 -c "$TMP/src" "$TMP/list" "$mp" >/dev/null
	sync -f "$mp/d"
	t1=$(now)
	put "$id" "ingest_r$r" "$(secs "$t0" "$t1")"
	t0=$(now)
	cp "$TMP/ckpt" "$mp/ckpt"
	sync -f "$mp/ckpt"
	t1=$(now)
	put "$id" "ckpt_save_r$r" "$(secs "$t0" "$t1")"
	"$bin" umount "$mp"
	"$bin" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$vol.log" \
		--cache-dir "$TMP/cache-$vol" 2>/dev/null
	drop
	t0=$(now)
	"$RD" -t 4 -S 77 "$TMP/list" "$mp" >"$TMP/read.out"
	t1=$(now)
	put "$id" "epoch_r$r" "$(secs "$t0" "$t1")"
	[ "$(field "$(cat "$TMP/read.out")" errors)" = 0 ] || put "$id" failed "read errors"
	drop
	t0=$(now)
	cmp -s "$TMP/ckpt" "$mp/ckpt" || put "$id" failed "checkpoint differs"
	t1=$(now)
	put "$id" "ckpt_read_r$r" "$(secs "$t0" "$t1")"
	"$bin" umount "$mp"
	rm -rf "$TMP/cache-$vol" "$TMP/cache-$vol-w" "$TMP/s3/data/granary/$vol"
}

for r in $(seq 1 "$R"); do
	say "s3sig: round $r"
	one v4 "$r" "$G" ""
	one v2 "$r" "$G" "?sig=v2"
	[ -z "$BASE" ] || one base "$r" "$BASE" ""
done

KEYS="ingest epoch ckpt_save ckpt_read"
# ratio per round of A over B, then their median
for k in $KEYS; do
	for pair in "v4 v2" ${BASE:+"v4 base"}; do
		set -- $pair
		for r in $(seq 1 "$R"); do
			put "$1-$2" "${k}_r$r" "$(awk -v a="$(get "$1" "${k}_r$r")" \
				-v b="$(get "$2" "${k}_r$r")" 'BEGIN { printf "%.3f", a / b }')"
		done
		median "$1-$2" "$k" "$R"
	done
	for id in v4 v2 ${BASE:+base}; do median "$id" "$k" "$R"; done
done

mkdir -p "$OUT"
{
	echo "S3 signature cost on s3rver (loopback), $R interleaved rounds:" \
		"$N files of 64 KiB ingested (4 writers) and read cold (4 readers," \
		"shuffled), a $CK MiB checkpoint saved (write + fsync) and read cold." \
		"Seconds are medians over rounds; ratios are medians of the" \
		"per-round ratios (V4 time / V2 time: under 1.05 is the target)."
	echo
	echo "| workload | V4 s | V2 s | V4/V2 |${BASE:+ libs3 s | V4/libs3 |}"
	echo "|---|---|---|---|${BASE:+---|---|}"
	for k in $KEYS; do
		echo "| $k | $(get v4 "$k") | $(get v2 "$k") | $(get v4-v2 "$k") |${BASE:+ $(get base "$k") | $(get v4-base "$k") |}"
	done
	echo
	echo "Per-round V4/V2 (the spread is the machine's noise):"
	echo
	for k in $KEYS; do
		echo "- $k: $(for r in $(seq 1 "$R"); do printf '%s ' "$(get v4-v2 "${k}_r$r")"; done)"
	done
	for id in v4 v2 ${BASE:+base}; do
		[ -z "$(get "$id" failed)" ] || echo "FAILED: $id: $(get "$id" failed)"
	done
} | tee "$OUT/s3sig-$(date +%Y-%m-%d-%H%M).md"
