#!/bin/bash
# gc.sh BUILD_DIR - how fast granary gc compares a store with its metadata.
#
# bench/gcscan fills a fresh volume with BENCH_GC_FILES small files (one
# block object each; default 100000) and 1% leaked objects on a file://
# pool, and BENCH_GC_S3_FILES (default 20000) on s3rver, then times in the
# same run the raw listing of the store (the floor), the walk of the
# metadata, and gc (report only). Target (issue 21): gc at least 0.5x the
# raw listing's rate. Prints a table and writes it to bench/results.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
FILES=${BENCH_GC_FILES:-100000}
S3_FILES=${BENCH_GC_S3_FILES:-20000}
# BENCH_GC_S3_PUT=1: fill s3rver with one PUT an object (a few hundred a
# second) rather than laying its files down straight (gcscan's
# GCSCAN_S3RVER_DIR); the listing and gc go through s3rver either way.
S3_PUT=${BENCH_GC_S3_PUT:-0}

[ -x "$O/bench/gcscan" ] || { say "gc: no $O/bench/gcscan (make all)"; exit 1; }
TMP=$(mktemp -d /var/tmp/granary-gcbench.XXXXXX)
trap 'svc_stop_all; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
svc_start_redis "$TMP/redis" >/dev/null || exit 1
svc_start_s3rver "$TMP/s3" granary >/dev/null || exit 1

say "gc: file:// with $FILES files"
mkdir -p "$TMP/pool"
F=$("$O/bench/gcscan" "$GRANARY_TEST_REDIS?db=1" "file://$TMP/pool" "$FILES" 1 8 2>/dev/null) ||
	{ say "gc: the file:// run failed"; exit 1; }
say "  $F"
say "gc: s3rver with $S3_FILES files"
direct=$TMP/s3/data/granary/gc
[ "$S3_PUT" = 1 ] && direct=
S=$(GCSCAN_S3RVER_DIR=$direct "$O/bench/gcscan" "$GRANARY_TEST_REDIS?db=2" "$GRANARY_TEST_S3/granary/gc" "$S3_FILES" 1 8 2>/dev/null) ||
	{ say "gc: the s3rver run failed"; S=""; }
say "  $S"

row() { # NAME LINE
	local l=$2
	[ -n "$l" ] || { echo "| $1 | n/a |||||||"; return; }
	echo "| $1 | $(field "$l" objects) | $(field "$l" list_s) | $(field "$l" list_rate) | $(field "$l" walk_s) | $(field "$l" walk_rate) | $(field "$l" gc_s) | $(field "$l" gc_rate) | $(field "$l" gc_vs_list)x |"
}
OUT=$TOP/bench/results/gc-$(date +%Y-%m-%d-%H%M).md
{
	echo "# granary gc: the comparison of a store with its metadata ($(date -u +%FT%TZ), $(nproc) cores)"
	echo
	echo "A volume of small files (one 4 KiB block object each) and 1% leaked objects (bench/gcscan); in the same run: the raw listing of blocks/ and packs/ (objstore_list), the walk of the metadata (meta_scan_refs), and gc_run without --delete. Seconds and objects (or references) per second. Target (issue 21): gc at least 0.5x the raw listing's rate."
	echo
	echo "| store | objects | list s | list objects/s | metadata walk s | references/s | gc s | gc objects/s | gc / list |"
	echo "|---|---|---|---|---|---|---|---|---|"
	row "file://" "$F"
	row "s3rver" "$S"
} | tee "$OUT"
say "gc: wrote $OUT"
