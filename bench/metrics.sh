#!/bin/bash
# metrics.sh [BUILD_DIR] - the cost of the metrics and of the access log
# (issue 25): a small-file epoch (read BENCH_METRICS_FILES files of 16 KiB
# with 4 readers from a fresh mount) and a checkpoint save (BENCH_METRICS_MB
# MiB of random bytes, dd conv=fsync), each with everything off, with the
# metrics endpoint on (being scraped once a second), and with the access
# log on; in one run, interleaved rounds (the order rotates each round),
# on a file:// volume. With BENCH_METRICS_BASELINE=BINARY (a granary built
# without the counters, e.g. from the commit before them), a fourth
# configuration "base" mounts with that binary: the cost of the counters
# that are always on (FUSE, store and Redis latencies). Reports the medians
# of the per-round ratios in bench/results/metrics-DATE.md.
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
case $O in /*) ;; *) O=$ROOT/$O ;; esac
NF=${BENCH_METRICS_FILES:-3000}
MB=${BENCH_METRICS_MB:-1024}
ROUNDS=${BENCH_METRICS_ROUNDS:-5}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d)
[ -x "$O/granary" ] || { say "metrics: '$O/granary' is missing: run 'make all' first"; exit 1; }
command -v curl >/dev/null || { say "metrics: curl is missing"; exit 1; }

. "$ROOT/tests/lib/services.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-metrics.XXXXXX")
TMP=$(realpath "$TMP")
RES=$TMP/res
MOUNTS=""
SCRAPER=""
mkdir -p "$RES" "$OUT" "$TMP/bin"
cp "$O/granary" "$TMP/bin/"
G=$TMP/bin/granary
BASE=${BENCH_METRICS_BASELINE:-}
CFGS=(off metrics alog)
if [ -n "$BASE" ]; then
	[ -x "$BASE" ] || { say "metrics: BENCH_METRICS_BASELINE '$BASE' is no program"; exit 1; }
	cp "$BASE" "$TMP/bin/granary-base"
	CFGS=(base off metrics alog)
fi
cleanup() {
	[ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null
	mounts_cleanup metrics
}
trap cleanup EXIT

svc_start_redis "$TMP/redis" || exit 1
META="$GRANARY_TEST_REDIS?db=1"
mkdir -p "$TMP/data" "$TMP/mnt"
"$G" format "$META" bench --storage "file://$TMP/data" --trash-days 0 >/dev/null 2>&1 ||
	{ say "metrics: format failed"; exit 1; }

# mount CONFIG: off | metrics | alog, no disk cache (reads reach the
# store), no metadata backups
mount_cfg() {
	local extra=(--metrics off) g=$G
	case $1 in
	base) extra=() g=$TMP/bin/granary-base ;;
	metrics) extra=(--metrics 127.0.0.1:0) ;;
	alog) extra=(--metrics off --access-log "$TMP/access.log") ;;
	esac
	"$g" mount "$META" "$TMP/mnt" --log "$TMP/mount.log" --cache-size 0 \
		--backup-meta 0 "${extra[@]}" >/dev/null 2>&1 ||
		{ say "metrics: mount ($1) failed: $(tail -3 "$TMP/mount.log")"; exit 1; }
	MOUNTS="$TMP/mnt"
	if [ "$1" = metrics ]; then
		local addr
		addr=$(getfattr --absolute-names --only-values -n granary.stats "$TMP/mnt" |
			sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p')
		# a Prometheus that scrapes every second
		(while :; do curl -sf -o /dev/null "http://$addr/metrics"; sleep 1; done) &
		SCRAPER=$!
	fi
}
umount_cfg() {
	[ -n "$SCRAPER" ] && { kill "$SCRAPER" 2>/dev/null; wait "$SCRAPER" 2>/dev/null; SCRAPER=""; }
	"$G" umount "$TMP/mnt" >/dev/null 2>&1 || { say "metrics: umount failed"; exit 1; }
	MOUNTS=""
	rm -f "$TMP/access.log"
}

say "metrics: writing $NF small files and a ${MB} MiB source"
mount_cfg off
mkdir -p "$TMP/mnt/ds"
for d in $(seq 0 19); do
	mkdir "$TMP/mnt/ds/d$d"
	for i in $(seq "$d" 20 $((NF - 1))); do
		head -c 16384 /dev/urandom >"$TMP/mnt/ds/d$d/f$i"
	done
done
umount_cfg
head -c $((MB << 20)) /dev/urandom >"$TMP/src.bin"

epoch() { # seconds to read every file, 4 readers
	local t0 t1
	t0=$(now)
	find "$TMP/mnt/ds" -type f -print0 | xargs -0 -P 4 -n 100 cat >/dev/null
	t1=$(now)
	echo "$t1 - $t0" | bc -l
}
save() { # seconds to save the checkpoint, fsync'd
	local t0 t1
	t0=$(now)
	dd if="$TMP/src.bin" of="$TMP/mnt/ckpt" bs=4M conv=fsync status=none
	t1=$(now)
	rm -f "$TMP/mnt/ckpt"
	echo "$t1 - $t0" | bc -l
}

NC=${#CFGS[@]}
for r in $(seq 1 "$ROUNDS"); do
	for k in $(seq 0 $((NC - 1))); do
		cfg=${CFGS[$(((k + r) % NC))]}
		mount_cfg "$cfg"
		put "$cfg" "epoch_r$r" "$(epoch)"
		put "$cfg" "save_r$r" "$(save)"
		[ "$cfg" = alog ] && put alog "lines_r$r" "$(wc -l <"$TMP/access.log")"
		umount_cfg
	done
	line="metrics: round $r:"
	for c in "${CFGS[@]}"; do
		line="$line $c $(get "$c" "epoch_r$r")/$(get "$c" "save_r$r")"
	done
	say "$line (epoch/save seconds)"
done

# medians of the per-round ratios to off
ratio() { # CFG KEY [TO]: the median of CFG's rounds over TO's (off)
	local r v=""
	for r in $(seq 1 "$ROUNDS"); do
		v="$v $(echo "$(get "$1" "$2_r$r") / $(get "${3:-off}" "$2_r$r")" | bc -l)"
	done
	# shellcheck disable=SC2086
	mid $v
}
for c in "${CFGS[@]}"; do
	median "$c" epoch "$ROUNDS"
	median "$c" save "$ROUNDS"
done
pct() { printf '%+.1f%%' "$(echo "($1 - 1) * 100" | bc -l)"; }
REPORT=$OUT/metrics-$STAMP.md
{
	echo "# The cost of the metrics and the access log ($STAMP)"
	echo
	echo "bench/metrics.sh on $(nproc) cores, file:// volume on $(df -P "$TMP" | awk 'NR == 2 { print $1 }'),"
	echo "no disk cache; $ROUNDS interleaved rounds (the order rotates); medians."
	echo "Epoch: read $NF files of 16 KiB, 4 readers, fresh mount. Save: $MB MiB, dd bs=4M conv=fsync."
	echo "metrics: --metrics 127.0.0.1:0 scraped once a second; alog: --access-log."
	echo
	echo "| workload | off (s) | metrics (s) | alog (s) | metrics vs off | alog vs off |"
	echo "|---|---|---|---|---|---|"
	for w in epoch save; do
		printf '| %s | %.3f | %.3f | %.3f | %s | %s |\n' "$w" \
			"$(get off $w)" "$(get metrics $w)" "$(get alog $w)" \
			"$(pct "$(ratio metrics $w)")" "$(pct "$(ratio alog $w)")"
	done
	if [ -n "$BASE" ]; then
		echo
		echo "The counters that are always on (off, and metrics on and scraped) against"
		echo "a build without them (base: $(basename "$BASE"), BENCH_METRICS_BASELINE):"
		echo
		echo "| workload | base (s) | off vs base | metrics vs base |"
		echo "|---|---|---|---|"
		for w in epoch save; do
			printf '| %s | %.3f | %s | %s |\n' "$w" "$(get base $w)" \
				"$(pct "$(ratio off $w base)")" "$(pct "$(ratio metrics $w base)")"
		done
	fi
	echo
	echo "Access log lines per round (epoch + save): $(get alog lines_r1)."
	echo "Ratios are medians of the per-round ratios, not ratios of the medians."
} >"$REPORT"
cat "$REPORT"
