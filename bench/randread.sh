#!/bin/bash
# randread.sh [BUILD_DIR] - small random reads of one large file: N random
# 4 KiB reads (4 threads, offsets aligned, the same ones everywhere) of a
# BENCH_RR_MB MiB random file, cold, on the local disk (page cache
# dropped), on granary over s3rver and over file:// (fresh mount, empty
# caches, page cache dropped) and on the raw stores (ranged GETs of 4 KiB of
# one object, build/bench/rangeget). Prints a markdown table with reads/s
# and bytes fetched / bytes read, and keeps it in
# bench/results/randread-DATE.md. Starts its own Redis and s3rver; stops
# and unmounts all it started on exit.
#
# Env: BENCH_RR_MB (512), BENCH_RR_READS (2000), BENCH_RR_THREADS (4),
# BENCH_RR_RAW_MB (64, the raw-store object), BENCH_RR_DIRECT=1 (O_DIRECT
# reads instead of buffered ones), BENCH_DIR (/var/tmp), BENCH_OUT.
set -eu -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $O in /*) ;; *) O=$ROOT/$O ;; esac
G=$O/granary RR=$O/tests/randread RG=$O/bench/rangeget
MB=${BENCH_RR_MB:-512}
N=${BENCH_RR_READS:-2000}
T=${BENCH_RR_THREADS:-4}
RAW_MB=${BENCH_RR_RAW_MB:-64}
SEED=4242 PIECE=4096
DFLAG=""
[ "${BENCH_RR_DIRECT:-0}" = 1 ] && DFLAG=-d
OUT=${BENCH_OUT:-$ROOT/bench/results}
for b in "$G" "$RR" "$RG"; do
	[ -x "$b" ] || { echo "randread: '$b' is missing (make all)" >&2; exit 1; }
done

. "$ROOT/tests/lib/services.sh"
. "$ROOT/bench/lib.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-rr.XXXXXX")
MOUNTS=""
cleanup() { mounts_cleanup randread; }
trap cleanup EXIT
trap 'exit 130' INT TERM

drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p; s/^$1=\([0-9.]*\).*/\1/p" | head -n 1; }
ratio() { awk -v f="$1" -v r="$2" 'BEGIN { if (r > 0) printf "%.2f", f / r; else print "n/a" }'; }
store_stat() { # MP FIELD: a "store" counter of the client's granary.stats
	getfattr --absolute-names --only-values -n granary.stats "$1" 2>/dev/null |
		tr -d ' \n' | sed -n "s/.*\"store\":{[^}]*\"$2\":\([0-9]*\).*/\1/p"
}

ROWS=$TMP/rows
: >"$ROWS"
row() { echo "| $1 | $2 | $3 | $4 |" >>"$ROWS"; }

printf 'randread: %s random %s-byte reads (%s threads) of a %s MiB file ...\n' \
	"$N" "$PIECE" "$T" "$MB" >&2
svc_start_redis "$TMP/redis" >/dev/null
svc_start_s3rver "$TMP/s3" granary >/dev/null
mkdir -p "$TMP/local"
head -c $((MB << 20)) /dev/urandom >"$TMP/local/big"

# ---- local disk: the same file, page cache dropped
drop
out=$("$RR" $DFLAG -n "$N" -b "$PIECE" -t "$T" -S "$SEED" "$TMP/local/big")
row "local disk" "$(echo "$out" | field reads_per_s)" \
	"$(ratio "$(echo "$out" | field io_read_bytes)" "$(echo "$out" | field bytes)")" \
	"block device reads (readahead included)"

# ---- granary: write, remount cold, read; verify the bytes after timing
granary_row() { # LABEL NAME STORAGE_URL DB
	local label=$1 name=$2 url=$3 db=$4 mp=$TMP/mnt-$2 out b0 b1 g0 g1 note
	"$G" format "$GRANARY_TEST_REDIS?db=$db" "rr-$name" --storage "$url" >/dev/null
	mkdir -p "$mp"
	MOUNTS="$MOUNTS $mp"
	"$G" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$name-w.log" \
		--cache-dir "$TMP/cache-$name-w"
	cp "$TMP/local/big" "$mp/big"
	"$G" umount "$mp"
	"$G" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$name.log" \
		--cache-dir "$TMP/cache-$name"
	drop
	b0=$(store_stat "$mp" get_bytes) g0=$(store_stat "$mp" gets)
	out=$("$RR" $DFLAG -n "$N" -b "$PIECE" -t "$T" -S "$SEED" "$mp/big")
	b1=$(store_stat "$mp" get_bytes) g1=$(store_stat "$mp" gets)
	note="$((g1 - g0)) GETs"
	"$RR" -n "$N" -b "$PIECE" -S "$SEED" -c "$TMP/local/big" "$mp/big" >/dev/null ||
		note="DATA MISMATCH"
	row "granary on $label" "$(echo "$out" | field reads_per_s)" \
		"$(ratio $((b1 - b0)) "$(echo "$out" | field bytes)")" "$note"
	"$G" umount "$mp"
}
granary_row s3rver s3 "$GRANARY_TEST_S3/granary/vol" 1
granary_row file:// file "file://$TMP/data" 2

# ---- the raw stores: ranged GETs of one object
raw_row() { # NAME URL
	local out
	out=$("$RG" -p "$RAW_MB" -n "$N" -b "$PIECE" -t "$T" -S "$SEED" "$2" raw/big)
	row "raw $1 (ranged GETs)" "$(echo "$out" | field reads_per_s)" \
		"$(ratio "$(echo "$out" | field store_get_bytes)" "$(echo "$out" | field bytes)")" \
		"one $RAW_MB MiB object"
}
raw_row s3rver "$GRANARY_TEST_S3/granary"
mkdir -p "$TMP/raw"
raw_row file:// "file://$TMP/raw"

mkdir -p "$OUT"
{
	echo "Random ${PIECE}-byte reads of a $MB MiB file: $N reads, $T threads," \
		"cold, ${DFLAG:+O_DIRECT}${DFLAG:-buffered} ($(date +%Y-%m-%d), $(nproc) cores)."
	echo
	echo "| target | reads/s | bytes fetched / bytes read | notes |"
	echo "|---|---|---|---|"
	cat "$ROWS"
} | tee "$OUT/randread-$(date +%Y-%m-%d-%H%M).md"
