#!/bin/bash
# packfetch.sh [BUILD_DIR] - what a cold epoch of small packed files fetches
# from the store: BENCH_PF_FILES files of 128 KiB (packed many to an
# object), read whole by 4 readers in shuffled order on a fresh mount with
# an empty disk cache and the page cache dropped, on s3rver and on file://.
# Prints a markdown table of GETs and bytes fetched per byte read and per
# pack byte (1.00 is each pack fetched once), checks the bytes read back,
# and keeps the table in bench/results/packfetch-DATE.md. Starts its own
# Redis and s3rver; stops and unmounts all it started on exit.
#
# Env: BENCH_PF_FILES (1000), BENCH_PF_THREADS (4), BENCH_PF_GRANARY (the
# granary binary to measure, default BUILD_DIR/granary: point it at an
# older build for a before/after table), BENCH_PF_LABEL (a note for the
# table's title), BENCH_DIR (/var/tmp), BENCH_OUT.
set -eu -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $O in /*) ;; *) O=$ROOT/$O ;; esac
G=${BENCH_PF_GRANARY:-$O/granary} RD=$O/bench/readers
N=${BENCH_PF_FILES:-1000}
T=${BENCH_PF_THREADS:-4}
SIZE=$((128 << 10)) SEED=2424
OUT=${BENCH_OUT:-$ROOT/bench/results}
for b in "$G" "$RD"; do
	[ -x "$b" ] || { echo "packfetch: '$b' is missing (make all)" >&2; exit 1; }
done

. "$ROOT/tests/lib/services.sh"
. "$ROOT/bench/lib.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-pf.XXXXXX")
MOUNTS=""
cleanup() { mounts_cleanup packfetch; }
trap cleanup EXIT
trap 'exit 130' INT TERM

drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
ratio() { awk -v f="$1" -v r="$2" 'BEGIN { if (r > 0) printf "%.3f", f / r; else print "n/a" }'; }
# DIR PATTERN: objects (files) under DIR whose path matches, and their bytes
objs() { find "$1" -type f -path "$2" -printf '%s\n' | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }'; }

ROWS=$TMP/rows
: >"$ROWS"

printf 'packfetch: %s files of %s bytes, %s readers, shuffled ...\n' "$N" "$SIZE" "$T" >&2
svc_start_redis "$TMP/redis" >/dev/null
svc_start_s3rver "$TMP/s3" granary >/dev/null
mkdir -p "$TMP/src/d"
head -c $((N * SIZE)) /dev/urandom | split -a 5 -d -b "$SIZE" - "$TMP/src/d/f"
(cd "$TMP/src" && find d -type f | sort) >"$TMP/list"

row() { # LABEL NAME STORAGE_URL DB OBJDIR OBJPATTERN
	local label=$1 name=$2 url=$3 db=$4 mp=$TMP/mnt-$2 out b0 b1 g0 g1 note
	local packs pbytes read
	"$G" format "$GRANARY_TEST_REDIS?db=$db" "pf-$name" --storage "$url" >/dev/null
	mkdir -p "$mp"
	MOUNTS="$MOUNTS $mp"
	"$G" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$name-w.log" \
		--cache-dir "$TMP/cache-$name-w"
	"$RD" -t "$T" -c "$TMP/src" "$TMP/list" "$mp" >/dev/null
	"$G" umount "$mp"
	read -r packs pbytes < <(objs "$5" "$6")
	"$G" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/log-$name.log" \
		--cache-dir "$TMP/cache-$name"
	drop
	b0=$(gstat "$mp" store get_bytes) g0=$(gstat "$mp" store gets)
	out=$("$RD" -t "$T" -S "$SEED" "$TMP/list" "$mp")
	b1=$(gstat "$mp" store get_bytes) g1=$(gstat "$mp" store gets)
	read=$(field "$out" bytes)
	note=""
	[ "$(field "$out" errors)" = 0 ] || note="READ ERRORS"
	diff -rq "$TMP/src/d" "$mp/d" >/dev/null || note="DATA MISMATCH"
	echo "| $label | $N | $packs | $pbytes | $((g1 - g0)) | $((b1 - b0)) |" \
		"$(ratio $((b1 - b0)) "$read") | $(ratio $((b1 - b0)) "$pbytes") |" \
		"$(field "$out" mib_per_s) | $note |" >>"$ROWS"
	"$G" umount "$mp"
}
# s3rver keeps an object as KEY._S3rver_object under its bucket's directory
row "granary on s3rver" s3 "$GRANARY_TEST_S3/granary/vol" 1 "$TMP/s3" '*/vol/*packs/*_S3rver_object'
row "granary on file://" file "file://$TMP/data" 2 "$TMP/data" '*/packs/*'

mkdir -p "$OUT"
{
	echo "Cold shuffled epoch of $N files of 128 KiB (packed), $T readers," \
		"disk cache on, page cache dropped${BENCH_PF_LABEL:+ ($BENCH_PF_LABEL)}"
	echo
	echo "| target | files | packs | pack bytes | GETs | bytes fetched | fetched / read | fetched / pack bytes | MiB/s | note |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	cat "$ROWS"
} | tee "$OUT/packfetch-$(date +%Y-%m-%d-%H%M).md"
