#!/bin/bash
# quota.sh BUILD_DIR - what a directory quota costs the write path (issue
# 23: within 5%), in one run, one mount of one volume (file:// store,
# Redis on a local socket): small-file ingest (BENCH_Q_FILES files of
# 4-64 KiB in one directory, default 5000; bench/gen_dataset -m 16) and a
# checkpoint save (BENCH_Q_CKPT_MB MiB, default 1024, dd bs=4M
# conv=fsync of random bytes), each into a directory without a quota and
# into one with a quota far from full (1 TiB, 10M inodes), back to back,
# their order alternating, BENCH_Q_ROUNDS rounds (default 5); medians,
# and the median of the rounds' ratios. Redis's own figures for the
# ingest too (commands and their CPU time a file, INFO commandstats),
# which the machine's load does not blur. Prints a table and writes it to
# bench/results/quota-DATE.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
N=${BENCH_Q_FILES:-5000}
CKPT_MB=${BENCH_Q_CKPT_MB:-1024}
ROUNDS=${BENCH_Q_ROUNDS:-5}

[ -x "$O/granary" ] && [ -x "$O/bench/gen_dataset" ] ||
	{ say "quota: no $O/granary or $O/bench/gen_dataset (make all)"; exit 1; }
TMP=$(mktemp -d /var/tmp/granary-quota.XXXXXX)
RES=$TMP/res
MP=$TMP/mnt
cleanup() {
	mountpoint -q "$MP" && { "$O/granary" umount "$MP" >/dev/null 2>&1 || fusermount3 -uz "$MP"; }
	svc_stop_all
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RES" "$MP"

svc_start_redis "$TMP/redis" >/dev/null || exit 1
META="$GRANARY_TEST_REDIS?db=1"
"$O/granary" format "$META" quota --storage "file://$TMP/pool" --force \
	>/dev/null 2>&1 || { say "quota: format failed"; exit 1; }
"$O/granary" mount "$META" "$MP" --log "$TMP/mount.log" \
	--cache-dir "$TMP/cache" --backup-meta 0 >/dev/null 2>&1 ||
	{ say "quota: mount failed (see $TMP/mount.log)"; exit 1; }
mkdir "$MP/plain" "$MP/quota"
"$O/granary" quota set "$META" --path /quota --capacity 1T --inodes 10000000 \
	>/dev/null || { say "quota: quota set failed"; exit 1; }
sleep 1.5 # the client reads the quotas' generation once a second
say "quota: $CKPT_MB MiB of random bytes for the checkpoint"
head -c $((CKPT_MB << 20)) /dev/urandom >"$TMP/ckpt.src"
secs() { echo "$2 - $1" | bc -l; }
SOCK=${GRANARY_TEST_REDIS#unix://}
SOCK=${SOCK%%\?*}
# Redis's counters: commands run (those scripts run included), their
# CPU time in microseconds, and script calls (FCALL, EVALSHA)
rstat() {
	redis-cli -s "$SOCK" info commandstats | tr -d '\r' |
		awk -F '[=,:]' '/^cmdstat_/ { c += $3; u += $5 }
			/^cmdstat_(fcall|evalsha)/ { s += $3 }
			END { print c + 0, u + 0, s + 0 }'
}
per_file() { echo "($2 - $1) / $N" | bc -l | xargs printf '%.1f'; }

# ingest ROUND DIR, save ROUND DIR: one measure each
ingest() {
	local t0 t1 r0 r1 d=$MP/$2/ds$1
	sync
	read -r -a r0 <<<"$(rstat)"
	t0=$(now)
	"$O/bench/gen_dataset" -n "$N" -d 1 -m 16 -s "$1" "$d" "$TMP/list" \
		>/dev/null || { say "quota: ingest failed"; exit 1; }
	t1=$(now)
	read -r -a r1 <<<"$(rstat)"
	put "$2" "ingest_r$1" "$(echo "$N / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')"
	put "$2" "rcmds_r$1" "$(per_file "${r0[0]}" "${r1[0]}")"
	put "$2" "rusec_r$1" "$(per_file "${r0[1]}" "${r1[1]}")"
	put "$2" "rscripts_r$1" "$(per_file "${r0[2]}" "${r1[2]}")"
	rm -rf "$d"
}
save() {
	local t0 t1 f=$MP/$2/ckpt$1
	sync
	t0=$(now)
	dd if="$TMP/ckpt.src" of="$f" bs=4M conv=fsync status=none ||
		{ say "quota: checkpoint failed"; exit 1; }
	t1=$(now)
	put "$2" "ckpt_r$1" "$(echo "$CKPT_MB / $(secs "$t0" "$t1")" | bc -l | xargs printf '%.0f')"
	rm -f "$f"
}
ratio_r() { echo "$(get quota "$1_r$2") / $(get plain "$1_r$2")" | bc -l | xargs printf '%.3f'; }

for r in $(seq 1 "$ROUNDS"); do
	order="plain quota"
	[ $((r % 2)) = 0 ] && order="quota plain"
	for d in $order; do ingest "$r" "$d"; done
	for d in $order; do save "$r" "$d"; done
	put ratio "ingest_r$r" "$(ratio_r ingest "$r")"
	put ratio "ckpt_r$r" "$(ratio_r ckpt "$r")"
	say "  round $r: ingest $(get plain "ingest_r$r") vs $(get quota "ingest_r$r") files/s, checkpoint $(get plain "ckpt_r$r") vs $(get quota "ckpt_r$r") MiB/s"
done
for d in plain quota ratio; do
	for k in ingest ckpt rcmds rusec rscripts; do median "$d" "$k" "$ROUNDS"; done
done
qget=$("$O/granary" quota get "$META" --path /quota 2>&1 | tr '\n' ' ')
"$O/granary" umount "$MP" >/dev/null

OUT=$TOP/bench/results/quota-$(date +%Y-%m-%d-%H%M).md
{
	echo "# The cost of a directory quota on the write path ($(date -u +%FT%TZ), $(nproc) cores)"
	echo
	echo "One client, Redis on a local socket, a \`file://\` store on the same disk. Ingest: $N files of 2-128 KiB, mean 16 (\`bench/gen_dataset -d 1 -m 16\`, one directory, one process: create, write, close each). Checkpoint: $CKPT_MB MiB of random bytes, \`dd bs=4M conv=fsync\`. Into \`/plain\` (no quota) and \`/quota\` (a quota of 1 TiB and 10M inodes, far from full) of the same volume; in each round the two run back to back (their order alternating), and the ratio is the median of the rounds' ratios (the machine is shared: its load drifts between rounds). Medians of $ROUNDS rounds."
	echo
	echo "| | no quota | quota far from full | quota / no quota |"
	echo "|---|---|---|---|"
	echo "| small-file ingest (files/s) | $(get plain ingest) | $(get quota ingest) | $(get ratio ingest)x |"
	echo "| checkpoint save (MiB/s) | $(get plain ckpt) | $(get quota ckpt) | $(get ratio ckpt)x |"
	echo "| ingest: script calls a file (FCALL/EVALSHA) | $(get plain rscripts) | $(get quota rscripts) | |"
	echo "| ingest: Redis commands a file (scripts' included) | $(get plain rcmds) | $(get quota rcmds) | |"
	echo "| ingest: Redis CPU a file (µs, commandstats) | $(get plain rusec) | $(get quota rusec) | |"
	echo
	echo "Rounds (files/s, MiB/s; no quota vs quota):"
	echo
	for r in $(seq 1 "$ROUNDS"); do
		echo "- round $r: ingest $(get plain "ingest_r$r") vs $(get quota "ingest_r$r") ($(get ratio "ingest_r$r")x), checkpoint $(get plain "ckpt_r$r") vs $(get quota "ckpt_r$r") ($(get ratio "ckpt_r$r")x)"
	done
	echo
	echo "The quota after the run (everything written was removed again): \`$qget\`"
} >"$OUT"
cat "$OUT"
say "quota: wrote $OUT"
