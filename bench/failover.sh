#!/bin/bash
# failover.sh BUILD_DIR - what the no-loss mode (?wait=1: every change
# waits until a replica has it) costs against the default mode, in one
# run, on a Redis master with one replica (both with an AOF, everysec) on
# loopback and a file:// store: small-file ingest (BENCH_FO_FILES files of
# about 4 KiB, default 2000, written by one process) and a checkpoint save
# (BENCH_FO_CKPT_MB MiB, default 1024, dd conv=fsync of random bytes).
# BENCH_FO_ROUNDS rounds (default 5), the modes back to back in each;
# medians, and the median of the rounds' ratios. Prints
# a table and writes it to bench/results/failover-DATE.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
N=${BENCH_FO_FILES:-2000}
CKPT_MB=${BENCH_FO_CKPT_MB:-1024}
ROUNDS=${BENCH_FO_ROUNDS:-5}

[ -x "$O/granary" ] && [ -x "$O/bench/gen_dataset" ] ||
	{ say "failover: no $O/granary or $O/bench/gen_dataset (make all)"; exit 1; }
TMP=$(mktemp -d /var/tmp/granary-failover.XXXXXX)
RES=$TMP/res
cleanup() {
	local mp
	for mp in "$TMP"/mnt-*; do
		mountpoint -q "$mp" && { "$O/granary" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp"; }
	done
	svc_stop_all
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RES"

svc_start_redis_tcp "$TMP/master" "" --appendonly yes --appendfsync everysec ||
	exit 1
MPORT=$SVC_REDIS_PORT
svc_start_redis_tcp "$TMP/replica" "" --replicaof 127.0.0.1 "$MPORT" \
	--appendonly yes --appendfsync everysec || exit 1
svc_wait_replica "$SVC_REDIS_PORT" || exit 1
say "failover: master 127.0.0.1:$MPORT, replica 127.0.0.1:$SVC_REDIS_PORT"
say "failover: $CKPT_MB MiB of random bytes for the checkpoint"
head -c $((CKPT_MB << 20)) /dev/urandom >"$TMP/ckpt.src"

waits() { redis-cli -p "$MPORT" info commandstats | sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p'; }
secs() { echo "$2 - $1" | bc -l; }

# Both volumes mounted side by side (a database and a pool each), so that
# the two modes of a round run back to back: this machine's load drifts,
# and each round's ratio compares like with like.
MODES="default noloss"
for m in $MODES; do
	meta="redis://127.0.0.1:$MPORT/1"
	[ "$m" = noloss ] && meta="redis://127.0.0.1:$MPORT/2?wait=1"
	"$O/granary" format "$meta" "fo-$m" --storage "file://$TMP/pool-$m" \
		--force >/dev/null 2>&1 || { say "failover: format failed"; exit 1; }
	mkdir -p "$TMP/mnt-$m"
	"$O/granary" mount "$meta" "$TMP/mnt-$m" --log "$TMP/mount-$m.log" \
		--cache-dir "$TMP/cache-$m" >/dev/null 2>&1 ||
		{ say "failover: mount failed (see $TMP/mount-$m.log)"; exit 1; }
done

# ingest ROUND MODE, save ROUND MODE: one measure, its WAITs too
ingest() {
	local t0 t1 w0 w1 mp=$TMP/mnt-$2
	w0=$(waits)
	t0=$(now)
	"$O/bench/gen_dataset" -n "$N" -d 20 -m 4 -s "$1" "$mp/ds$1" \
		"$TMP/list" >/dev/null || { say "failover: ingest failed"; exit 1; }
	t1=$(now)
	w1=$(waits)
	put "$2" "ingest_r$1" "$(echo "$N / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')"
	put "$2" "iwaits_r$1" $((${w1:-0} - ${w0:-0}))
}
save() {
	local t0 t1 w0 w1 mp=$TMP/mnt-$2
	sync
	w0=$(waits)
	t0=$(now)
	dd if="$TMP/ckpt.src" of="$mp/ckpt$1" bs=4M conv=fsync status=none ||
		{ say "failover: checkpoint failed"; exit 1; }
	t1=$(now)
	w1=$(waits)
	put "$2" "ckpt_r$1" "$(echo "$CKPT_MB / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')"
	put "$2" "cwaits_r$1" $((${w1:-0} - ${w0:-0}))
	rm -f "$mp/ckpt$1"
}
ratio_r() { echo "$(get noloss "$1_r$2") / $(get default "$1_r$2")" | bc -l | xargs printf '%.2f'; }

for r in $(seq 1 "$ROUNDS"); do
	order=$MODES
	[ $((r % 2)) = 0 ] && order="noloss default"
	for m in $order; do ingest "$r" "$m"; done
	for m in $order; do save "$r" "$m"; done
	put ratio "ingest_r$r" "$(ratio_r ingest "$r")"
	put ratio "ckpt_r$r" "$(ratio_r ckpt "$r")"
	say "  round $r: ingest $(get default "ingest_r$r") vs $(get noloss "ingest_r$r") files/s ($(get noloss "iwaits_r$r") WAITs), checkpoint $(get default "ckpt_r$r") vs $(get noloss "ckpt_r$r") MiB/s ($(get noloss "cwaits_r$r") WAITs)"
done
for m in default noloss ratio; do
	for k in ingest ckpt iwaits cwaits; do median "$m" "$k" "$ROUNDS"; done
done
for m in $MODES; do "$O/granary" umount "$TMP/mnt-$m" >/dev/null; done

OUT=$TOP/bench/results/failover-$(date +%Y-%m-%d-%H%M).md
{
	echo "# The no-loss mode's cost ($(date -u +%FT%TZ), $(nproc) cores)"
	echo
	echo "A Redis master and one replica on loopback (AOF everysec on both), a \`file://\` store on the same disk; one client. Ingest: $N files of about 4 KiB (\`bench/gen_dataset -m 4\`, one process: create, write, close each). Checkpoint: $CKPT_MB MiB of random bytes, \`dd bs=4M conv=fsync\`. Both volumes mounted side by side; in each round the two modes run back to back (their order alternating), and the ratio is the median of the rounds' ratios (the machine is shared: its load drifts between rounds). Medians of $ROUNDS rounds. The no-loss mode is the metadata URL with \`?wait=1\`: every change is followed by \`WAIT 1\` in the same pipeline."
	echo
	echo "| | default | no-loss (?wait=1) | no-loss / default |"
	echo "|---|---|---|---|"
	echo "| small-file ingest (files/s) | $(get default ingest) | $(get noloss ingest) | $(get ratio ingest)x |"
	echo "| checkpoint save (MiB/s) | $(get default ckpt) | $(get noloss ckpt) | $(get ratio ckpt)x |"
	echo "| WAITs: ingest, checkpoint | $(get default iwaits), $(get default cwaits) | $(get noloss iwaits), $(get noloss cwaits) | |"
	echo
	echo "Rounds (files/s, MiB/s; default vs no-loss):"
	echo
	for r in $(seq 1 "$ROUNDS"); do
		echo "- round $r: ingest $(get default "ingest_r$r") vs $(get noloss "ingest_r$r") ($(get ratio "ingest_r$r")x), checkpoint $(get default "ckpt_r$r") vs $(get noloss "ckpt_r$r") ($(get ratio "ckpt_r$r")x)"
	done
} >"$OUT"
cat "$OUT"
say "failover: wrote $OUT"
