#!/bin/bash
# plan.sh [BUILD_DIR] - the epoch plan's benchmark (issue 34): a dataset
# of small packed files twice the size of the node's disk cache, on s3rver
# behind bench/slowproxy (a real region's first-byte delay and bandwidth
# per connection), one --read-only mount. In one run, each against its
# baseline:
#   1. a cold shuffled epoch with T readers (build/bench/readers -m -l):
#      files/s, MiB/s and per-file read latency p50/p99, with an epoch plan
#      of that order (granary plan, made just before the readers start)
#      and without; the raw store's GETs of objects of the pack size
#      through the same proxy (build/bench/store_raw) as the limit (the
#      proxy caps the total at 60 MB/s: a limit that more connections do
#      not raise);
#   2. epoch 2 (another order; the plan replaced): the store's bytes
#      fetched, against the least any eviction policy could fetch with
#      that cache (the dataset's stored bytes minus the cache's size);
#      and, as a diagnosis, epoch 2 on a mount restarted after epoch 1
#      (its disk cache kept, a new plan);
#   3. a PyTorch DataLoader (4 workers, raw bytes, no decode) over the same
#      data on a cold mount: granary.PlannedSampler against a plain
#      RandomSampler of the same order.
# Every file the readers read is checked by MD5. Prints a markdown table
# and writes it to bench/results/plan-DATE.md. Starts its own Redis,
# s3rver and proxy; unmounts and stops all it started on exit. See
# bench/README.md.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$ROOT/$O ;; esac
NF=${BENCH_PLAN_FILES:-3000}         # files
KMIN=${BENCH_PLAN_MIN_KIB:-64}       # their sizes: uniform in [KMIN, KMAX] KiB
KMAX=${BENCH_PLAN_MAX_KIB:-128}
T=${BENCH_PLAN_THREADS:-4}           # reader threads
W=${BENCH_PLAN_WRITERS:-4}           # writer threads of the copy in
ROUNDS=${BENCH_PLAN_ROUNDS:-2}       # rounds of the readers' epochs
TROUNDS=${BENCH_PLAN_TORCH_ROUNDS:-2} # rounds of the DataLoader's
RAW_THREADS=${BENCH_PLAN_RAW_THREADS:-4 16 24}
# The store's limit: a total cap, as a node's share of a real store's
# bandwidth is (without one, the raw rate grows with its connections, and
# no figure is "the limit"); SLOWSTORE_TOTAL_MBPS=0 for none.
export SLOWSTORE_TOTAL_MBPS=${SLOWSTORE_TOTAL_MBPS:-60}
RAW_N=${BENCH_PLAN_RAW_OBJECTS:-480}
MEM=${BENCH_PLAN_CACHE_MEM:-16M}     # --cache-mem of the read mounts
REMOUNT=${BENCH_PLAN_REMOUNT:-1}     # 1: the remount rows (see part 2)
HEAD=${BENCH_PLAN_HEADSTART:-0}      # seconds from the plan to the readers
PY=${BENCH_PLAN_PYTHON:-/usr/bin/python3}
STEP_TIMEOUT=${BENCH_TIMEOUT:-600}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)
BUCKET=granary VOL=vol

. "$ROOT/tests/lib/services.sh"
. "$HERE/lib.sh"
. "$HERE/lib/slowstore.sh"

for b in granary bench/readers bench/slowproxy bench/store_raw; do
	[ -x "$O/$b" ] || { say "plan: no $O/$b (make all)"; exit 1; }
done
"$O/bench/readers" -h | grep -q -- ' -l ' || { say "plan: $O/bench/readers has no -l (make all)"; exit 1; }
if [ "$TROUNDS" != 0 ] && ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
	say "plan: no torch or torchvision for $PY: no DataLoader rows (Debian: apt-get install python3-torch python3-torchvision)"
	TROUNDS=0
fi
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-plan.XXXXXX")
RES=$TMP/res
MP=$TMP/m # the one mount (the copy in: $TMP/w)
MOUNTS="$TMP/w $MP"
cleanup() { keep_or_cleanup plan; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RES" "$OUT" "$TMP/bin"
# private copies: a rebuild during the run changes nothing
cp "${BENCH_PLAN_GRANARY:-$O/granary}" "$TMP/bin/granary" || exit 1
cp "$O/bench/readers" "$O/bench/store_raw" "$TMP/bin/"
G=$TMP/bin/granary RD=$TMP/bin/readers
T_START=$(date +%s)

# ------------------------------------------------------------------------
# helpers

drop() { drop_pages "$TMP/notes"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# mnt [keep]: the read mount, a fresh (empty) disk cache unless keep
mnt() {
	[ "${1:-}" = keep ] || rm -rf "$TMP/cache"
	mkdir -p "$MP"
	"$G" mount "$META" "$MP" --read-only --cache-dir "$TMP/cache" --cache-size "$CACHE" \
		--cache-mem "$MEM" --metrics off --log "$TMP/log-m.log" </dev/null >/dev/null 2>>"$TMP/mount.err" ||
		{ say "plan: the mount failed: $(tail -3 "$TMP/log-m.log" 2>/dev/null)"; exit 1; }
}
umnt() {
	timeout 300 "$G" umount "$MP" >/dev/null 2>&1 || { say "plan: umount of $MP failed"; exit 1; }
}

# cpu PID: the CPU seconds process PID has used (0 when it is gone);
# mount_pid: the process serving $MP
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }
mount_pid() {
	local f
	for f in /proc/[0-9]*/cmdline; do
		tr '\0' '\n' 2>/dev/null <"$f" | grep -qx -- "$MP" || continue
		tr '\0' '\n' 2>/dev/null <"$f" | grep -qx mount || continue
		f=${f#/proc/}
		echo "${f%/cmdline}"
		return
	done
}
# cpu_mark; cpu_count ID: the CPU seconds of the client, s3rver and the
# proxy since the mark: ID's cpu_client, cpu_s3, cpu_proxy
cpu_now() { echo "$(cpu "${MPID:-0}") $(cpu "$SLOWSTORE_S3_PID") $(cpu "$SLOWSTORE_PID")"; }
cpu_mark() { MPID=$(mount_pid); read -r CPU_C CPU_S CPU_P < <(cpu_now); }
cpu_count() {
	local c s p
	read -r c s p < <(cpu_now)
	put "$1" cpu_client "$(awk -v a="$CPU_C" -v b="$c" 'BEGIN { printf "%.1f", b - a }')"
	put "$1" cpu_s3 "$(awk -v a="$CPU_S" -v b="$s" 'BEGIN { printf "%.1f", b - a }')"
	put "$1" cpu_proxy "$(awk -v a="$CPU_P" -v b="$p" 'BEGIN { printf "%.1f", b - a }')"
}

# stats SECTION FIELD: a figure of the mount's granary.stats now
stats() {
	getfattr --absolute-names --only-values -n granary.stats "$MP" 2>/dev/null |
		jq -r --arg s "$1" --arg f "$2" '.[$s][$f] // empty' 2>/dev/null
}
# dc_mark; dc_count ID: the disk cache's figures since the mark
DC_FIGS="hits misses evictions fill_skips evict_demoted evict_planned demoted fill_ranked_out"
dc_now() { local f; for f in $DC_FIGS; do echo "$f $(stats disk_cache "$f")"; done; }
dc_mark() { dc_now >"$TMP/dc.mark"; }
dc_count() {
	local f a b
	dc_now >"$TMP/dc.now"
	for f in $DC_FIGS; do
		a=$(awk -v k="$f" '$1 == k { print $2 }' "$TMP/dc.mark")
		b=$(awk -v k="$f" '$1 == k { print $2 }' "$TMP/dc.now")
		[ -n "$b" ] && put "$1" "dc_$f" $((b - ${a:-0}))
	done
}

# store_mark; store_count ID [SECS]: the proxy's successful GETs of the
# volume's objects since the mark: ID's gets, bytes, keys (distinct), most
# (of one); their mean first-byte and whole times (ms), and with SECS (the
# wall time they fell in) the GETs in flight on average (their times'
# sum / SECS)
store_mark() { sleep 0.5; MARK=$(slowstore_mark); }
store_count() {
	local g b k m t w
	sleep 0.5 # an answer is logged when it ends
	read -r g b k m < <(slowstore_gets "$MARK" "$BUCKET/$VOL/")
	put "$1" gets "$g"
	put "$1" bytes "$b"
	put "$1" keys "$k"
	put "$1" most "$m"
	read -r t w < <(tail -n +"$((MARK + 1))" "$SLOWSTORE_LOG" | awk -v p="/$BUCKET/$VOL/" \
		'$1 == "GET" && index($2, p) == 1 && $3 ~ /^2/ { n++; t += $6; w += $7 } END { if (n) printf "%.1f %.0f\n", t / n, w; else print "- 0" }')
	put "$1" ttfb "$t"
	[ -n "${2:-}" ] && put "$1" inflight "$(div "$w" "$(awk -v s="$2" 'BEGIN { print s * 1000 }')" "%.1f")"
}

# plan_figs ID [PREV]: the plan's figures now (granary plan --status
# --json); the counters (prefetched ... waited, which a --replace does not
# reset) less PREV's; the mount's granary.stats kept beside
PLAN_FIGS="files place window prefetched used wasted ready waited"
plan_figs() {
	local js f v p
	js=$("$G" plan --status --json "$MP" "$PLAN" 2>/dev/null)
	echo "$js" >"$TMP/planstatus-$1.json"
	getfattr --absolute-names --only-values -n granary.stats "$MP" >"$TMP/stats-$1.json" 2>/dev/null
	for f in $PLAN_FIGS; do
		v=$(jq -r --arg f "$f" '(.plans[0] // .)[$f] // empty' <<<"$js" 2>/dev/null)
		put "$1" "plan_${f}_total" "$v"
		case $f in files | place | window) ;; *)
			p=${2:+$(get "$2" "plan_${f}_total")}
			[ -n "$v" ] && [ -n "$p" ] && v=$((v - p))
			;;
		esac
		put "$1" "plan_$f" "$v"
	done
}

# epoch ID SEED PLAN [PREV]: the mount read whole by T readers in an order
# shuffled by SEED, every file MD5-checked; PLAN "": no plan, "new": a new
# plan of that order made just before (its id in $PLAN), "replace": plan
# $PLAN's list replaced by it (PREV: the epoch before, on that plan).
# ID's secs (the readers), plan_secs (making the plan), all_secs (both),
# files_s, mibs, p50, p99, errors, bad, hung; the store's, the disk
# cache's, the CPU and the plan's figures
epoch() {
	local id=$1 seed=$2 plan=$3 line rc=0 t0 t1 t2
	shuf --random-source=<(yes "$seed") "$TMP/sums" >"$TMP/order-$id"
	cut -c35- "$TMP/order-$id" >"$TMP/paths-$id"
	drop
	store_mark
	dc_mark
	cpu_mark
	t0=$(now)
	case $plan in
	new)
		PLAN=$("$G" plan "$MP/data" "$TMP/paths-$id" 2>"$TMP/err-plan-$id") ||
			{ say "plan: $id: granary plan failed: $(head -3 "$TMP/err-plan-$id")"; exit 1; }
		;;
	replace)
		"$G" plan --replace "$PLAN" "$MP/data" "$TMP/paths-$id" >/dev/null 2>"$TMP/err-plan-$id" ||
			{ say "plan: $id: granary plan --replace failed: $(head -3 "$TMP/err-plan-$id")"; exit 1; }
		;;
	esac
	[ -n "$plan" ] && [ "$HEAD" != 0 ] && sleep "$HEAD"
	t1=$(now)
	line=$(timeout -k 10 "$STEP_TIMEOUT" "$RD" -m -l -t "$T" "$TMP/order-$id" "$MP/data" 2>"$TMP/err-$id") || rc=$?
	t2=$(now)
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		put "$id" hung 1
		say "plan: $id: the epoch did not end within ${STEP_TIMEOUT}s"
	fi
	[ $rc = 0 ] || say "plan: $id: $(head -3 "$TMP/err-$id")"
	put "$id" secs "$(field "$line" secs)"
	put "$id" plan_secs "$(secs "$t0" "$t1")"
	put "$id" all_secs "$(secs "$t0" "$t2")"
	put "$id" files_s "$(field "$line" files_per_s)"
	put "$id" mibs "$(field "$line" mib_per_s)"
	put "$id" p50 "$(field "$line" p50_ms)"
	put "$id" p99 "$(field "$line" p99_ms)"
	put "$id" errors "$(field "$line" errors)"
	put "$id" bad "$(field "$line" bad)"
	cpu_count "$id"
	store_count "$id" "$(secs "$t0" "$t2")"
	dc_count "$id"
	[ -n "$plan" ] && plan_figs "$id" "${4:-}"
	say "plan: $id: $line (plan ${plan:-none}, $(get "$id" plan_secs) s to make it; store $(get "$id" gets) GETs, $(get "$id" bytes) bytes, $(get "$id" inflight) in flight, first byte $(get "$id" ttfb) ms)"
}

# raw ID THREADS: the raw store through the proxy, GETs of RAW_N objects
# of the pack size (put first, deleted after): ID's mibs, objs, p50, p99
raw() {
	local out gl s0
	s0=$(cpu "$SLOWSTORE_S3_PID")
	out=$("$TMP/bin/store_raw" -t "$2" -n "$RAW_N" -s "$PACK" -S 77 put,get,delete \
		"$SLOWSTORE_URL/$BUCKET" "raw-$1" 2>"$TMP/raw.err") ||
		{ put "$1" failed "$(head -1 "$TMP/raw.err")"; say "plan: $1: store_raw failed: $(head -1 "$TMP/raw.err")"; return; }
	gl=$(grep '^op=get' <<<"$out")
	put "$1" cpu_s3 "$(awk -v a="$s0" -v b="$(cpu "$SLOWSTORE_S3_PID")" 'BEGIN { printf "%.1f", b - a }')"
	put "$1" mibs "$(field "$gl" mib_per_s)"
	put "$1" objs "$(field "$gl" objects_per_s)"
	put "$1" p50 "$(field "$gl" p50_ms)"
	put "$1" p99 "$(field "$gl" p99_ms)"
	say "plan: $1: $gl"
}

# torch ID MODE SEED: a DataLoader epoch (bench/plan_torch.py) on a fresh
# mount, page cache dropped: ID's secs, files_s, mibs, the plan's figures
torch_epoch() {
	local id=$1 line rc=0 f
	mnt
	drop
	store_mark
	cpu_mark
	line=$(timeout -k 10 "$STEP_TIMEOUT" "$PY" "$HERE/plan_torch.py" "$MP/data" "$2" "$3" 4 2>"$TMP/err-$id") || rc=$?
	[ $rc = 0 ] || { put "$id" failed "exit $rc: $(grep -v '^ ' "$TMP/err-$id" | tail -1)"; say "plan: $id: $(tail -3 "$TMP/err-$id")"; }
	cpu_count "$id"
	store_count "$id" "$(field "$line" secs)"
	put "$id" secs "$(field "$line" secs)"
	put "$id" files_s "$(field "$line" files_per_s)"
	put "$id" mibs "$(field "$line" mib_per_s)"
	for f in ready waited prefetched used wasted window; do put "$id" "plan_$f" "$(field "$line" "plan_$f")"; done
	say "plan: $id: $line (store $(get "$id" gets) GETs, $(get "$id" bytes) bytes)"
	umnt
}

# ------------------------------------------------------------------------
# the store, the dataset, the volume

say "plan: starting Redis, s3rver and the proxy ..."
svc_start_redis "$TMP/redis" >/dev/null || exit 1
slowstore_start "$TMP" "$BUCKET" || exit 1
META="$GRANARY_TEST_REDIS?db=1"
"$G" format "$META" bench-plan --storage "$SLOWSTORE_URL/$BUCKET/$VOL" >/dev/null || exit 1

say "plan: the dataset: $NF files of $KMIN-$KMAX KiB ..."
"$PY" - "$TMP/src" "$NF" "$KMIN" "$KMAX" <<'EOF' || exit 1
import os, random, sys
top, n, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = random.Random(34)
for i in range(n):
    d = os.path.join(top, "c%02d" % (i % 20))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.bin" % i), "wb") as f:
        f.write(r.randbytes(r.randint(lo << 10, hi << 10)))
EOF
(cd "$TMP/src" && find . -type f | sed 's|^\./||' | sort) >"$TMP/list"
(cd "$TMP/src" && xargs -d '\n' md5sum -- <"$TMP/list") >"$TMP/sums" || exit 1
SIZE=$(cd "$TMP/src" && xargs -d '\n' stat -c %s -- <"$TMP/list" | awk '{ s += $1 } END { print s }')
CACHE=$((SIZE / 2))

# the copy in: a read-write mount, W writers (the files share packs);
# the objects counted in s3rver's directory
say "plan: copying it in through the proxy ..."
mkdir -p "$TMP/w"
"$G" mount "$META" "$TMP/w" --cache-dir "$TMP/cache-w" --cache-size "$CACHE" --metrics off \
	--log "$TMP/log-w.log" </dev/null >/dev/null 2>>"$TMP/mount.err" || { say "plan: the writer's mount failed"; exit 1; }
t0=$(now)
l=$("$RD" -t "$W" -c "$TMP/src" "$TMP/list" "$TMP/w/data") || { say "plan: the copy failed: $l"; exit 1; }
INGEST=$(secs "$t0" "$(now)")
timeout 300 "$G" umount "$TMP/w" >/dev/null 2>&1 || { say "plan: umount of the writer failed"; exit 1; }
rm -rf "$TMP/cache-w"
read -r OBJS STORED < <(find "$TMP/s3/data/$BUCKET/$VOL" -type f -name '*._S3rver_object' \
	\( -path '*/packs/*' -o -path '*/blocks/*' \) -printf '%s\n' | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }')
PACK=$((STORED / OBJS))
MIN2=$((STORED - CACHE))
say "plan: $NF files, $SIZE bytes in $OBJS objects ($STORED bytes, $PACK a pack); --cache-size $CACHE"

# ------------------------------------------------------------------------
# the rounds: the raw store, then a mount without a plan and one with, in
# turn (the order flips each round), each reading two epochs

noplan() { # R
	say "plan: round $1: without a plan ..."
	mnt
	epoch "none1-r$1" "$((100 + $1))" ""
	epoch "none2-r$1" "$((200 + $1))" ""
	umnt
}
withplan() { # R
	say "plan: round $1: with a plan ..."
	mnt
	epoch "plan1-r$1" "$((100 + $1))" new
	epoch "plan2-r$1" "$((200 + $1))" replace "plan1-r$1"
	umnt
}
# remount: epoch 1 with a plan, then the mount restarted on its disk cache
# (what epoch 1 left in it, without the client's marks of it), epoch 2
# with a new plan
remount() { # R
	say "plan: round $1: with a plan, the mount restarted between the epochs ..."
	mnt
	epoch "rplan1-r$1" "$((100 + $1))" new
	umnt
	mnt keep
	epoch "rplan2-r$1" "$((200 + $1))" new
	umnt
}
for r in $(seq 1 "$ROUNDS"); do
	say "plan: round $r: the raw store through the proxy ..."
	for t in $RAW_THREADS; do raw "raw$t-r$r" "$t"; done
	if [ $((r % 2)) = 1 ]; then noplan "$r"; withplan "$r"; else withplan "$r"; noplan "$r"; fi
	[ "$REMOUNT" = 1 ] && remount "$r"
done
for r in $(seq 1 "$TROUNDS"); do
	say "plan: round $r: PyTorch DataLoader, RandomSampler then PlannedSampler ..."
	torch_epoch "torchnone-r$r" random "$((300 + r))"
	torch_epoch "torchplan-r$r" plan "$((300 + r))"
done
RUNTIME=$(($(date +%s) - T_START))

# ------------------------------------------------------------------------
# report

# med KEY ID_PREFIX [N]: the median over rounds (1..N, ROUNDS) of
# ID_PREFIX-rR's KEY (of an even count, the mean of the middle two), with
# as many decimals as the values have
med() {
	local r v=""
	for r in $(seq 1 "${3:-$ROUNDS}"); do v="$v $(get "$2-r$r" "$1")"; done
	[ -n "${v// /}" ] || return 0
	# shellcheck disable=SC2086 # one value a word
	printf '%s\n' $v | sort -g | awk '{ a[NR] = $1; if (match($1, /\.[0-9]*/) && RLENGTH - 1 > d) d = RLENGTH - 1 }
		END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.*f\n", d, m }'
}
# ratios KEY A B [N]: RV, each round's A-rR KEY / B-rR KEY ("x / y"),
# and RLOW, the lowest of them
ratios() {
	local r x
	RV="" RLOW=""
	for r in $(seq 1 "${4:-$ROUNDS}"); do
		x=$(div "$(get "$2-r$r" "$1")" "$(get "$3-r$r" "$1")" "%.2f")
		RV="$RV${RV:+ / }${x}x"
		RLOW=$(awk -v a="$RLOW" -v b="$x" 'BEGIN { if (b == "—") print a; else if (a == "" || b + 0 < a + 0) print b; else print a }')
	done
}
# rawbest ROUND: the raw store's best MiB/s of that round, and its row's id
rawbest() {
	local t v best="" bid=""
	for t in $RAW_THREADS; do
		v=$(get "raw$t-r$1" mibs)
		[ -n "$v" ] || continue
		if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$v bid=raw$t; fi
	done
	echo "$best $bid"
}
met() { # VALUE OP TARGET
	awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN {
		if (v == "" || v == "—") { print "n/a"; exit }
		ok = (op == "<=") ? v <= t + 0.0005 : v >= t
		print ok ? "met" : "**NOT met**" }'
}
verdict() { # ID...: "" when every epoch of those IDs read right
	local id e b h f w=""
	for id in "$@"; do
		e=$(get "$id" errors) b=$(get "$id" bad) h=$(get "$id" hung) f=$(get "$id" failed)
		[ -n "$h" ] && w="$w $id hung;"
		[ -n "$f" ] && w="$w $id failed: $f;"
		[ -n "$e" ] && [ "$e" != 0 ] && w="$w $id: $e errors ($b wrong bytes);"
	done
	echo "$w"
}
: >"$TMP/foot"
footnote() { echo "$1" >>"$TMP/foot"; echo "[$(wc -l <"$TMP/foot")]"; }

report() {
	local r t w id l x rb ids
	echo "# Epoch plan benchmark (issue 34), $STAMP"
	echo
	echo "The store: s3rver on loopback behind bench/slowproxy, **$SLOWSTORE_DESC** (bench/lib/slowstore.sh" \
		"defaults but the total cap, plan.sh's: the raw rows show it is the limit; one proxy for every row). The dataset: $NF files of $KMIN-$KMAX KiB" \
		"(uniform, random bytes) in 20 directories, $SIZE bytes ($(mib "$SIZE") MiB), copied in" \
		"through a read-write mount by $W writers (default options: packed) in $INGEST s: $OBJS objects," \
		"$STORED bytes stored, $PACK bytes a pack on average. One --read-only mount with a disk cache of" \
		"half the dataset (--cache-size $CACHE, $(mib "$CACHE") MiB; an empty cache directory at each" \
		"mount), --cache-mem $MEM (so that the disk cache is the cache), other options default" \
		"(--plan-window: a quarter of the disk cache; --prefetch 8). Readers: build/bench/readers -m -l," \
		"$T threads taking the files of a shuffled list in order, each file MD5-checked as it is read;" \
		"latency: each file's open to close (its MD5, computed as it is read, included). The page cache is dropped before every epoch. Store: the" \
		"successful GETs of the volume's objects in the proxy's log, from just before the plan is made" \
		"to the readers' end (bytes: their bodies; in flight: the sum of their times over the wall time;" \
		"first byte: their mean time to the first byte, 30 ms when s3rver keeps up). $(nproc) cores" \
		"shared with other work (load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; everything" \
		"of the run under nice), Linux $(uname -r); $("$G" --version 2>/dev/null); the run took ${RUNTIME} s."
	[ "$HEAD" = 0 ] || echo "**BENCH_PLAN_HEADSTART=$HEAD: the readers start $HEAD s after the plan is made (a diagnosis, not the benchmark).**"
	echo
	echo "## 1. A cold shuffled epoch ($T readers)"
	echo
	echo "Rounds: $ROUNDS; each round runs the raw store, then a fresh mount without a plan and one with" \
		"a plan (the order of the two flips each round), both reading the same shuffled order. Figures" \
		"are the median of the rounds (of two, their mean), each round's in the notes; ratios are taken" \
		"within a round (same order, minutes apart), each round's shown, the target judged on the lower." \
		"\"with a plan, job\": from the start of \`granary plan\` (a --read-only mount: one get a file)" \
		"to the readers' end, what a job's epoch takes; the targets are judged on it."
	echo
	echo "| what | files/s | MiB/s | read p50 ms | read p99 ms | store GETs | store bytes / stored byte | GETs in flight | first byte ms | CPU s: client / s3rver |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for t in $RAW_THREADS; do
		w=$(for r in $(seq 1 "$ROUNDS"); do get "raw$t-r$r" failed; done | head -1)
		[ -n "$w" ] && w=" $(footnote "raw, $t threads: $w")"
		echo "| raw store: GET of $RAW_N objects of $PACK bytes (a pack), $t threads$w | $(awk -v m="$(med mibs "raw$t")" -v s="$SIZE" -v n="$NF" 'BEGIN { if (m != "") printf "%.1f", m * 1048576 / (s / n) }') (files' worth) | $(med mibs "raw$t") | $(med p50 "raw$t") | $(med p99 "raw$t") | $RAW_N | 1.000 | $t | | — / $(med cpu_s3 "raw$t") (put, get, delete) |"
	done
	for id in none1 plan1; do
		ids=""
		for r in $(seq 1 "$ROUNDS"); do ids="$ids $id-r$r"; done
		# shellcheck disable=SC2086
		w=$(verdict $ids)
		[ -n "$w" ] && w=" $(footnote "$id:$w")"
		l=$([ $id = none1 ] && echo "granary, no plan" || echo "granary, with a plan, readers only")
		echo "| $l$w | $(med files_s "$id") | $(med mibs "$id") | $(med p50 "$id") | $(med p99 "$id") | $(med gets "$id") | $(div "$(med bytes "$id")" "$STORED") | $(med inflight "$id") | $(med ttfb "$id") | $(med cpu_client "$id") / $(med cpu_s3 "$id") |"
		if [ $id = plan1 ]; then
			for r in $(seq 1 "$ROUNDS"); do
				put "$id-r$r" job_files_s "$(div "$NF" "$(get "$id-r$r" all_secs)" "%.1f")"
				put "$id-r$r" job_mibs "$(div "$(div "$SIZE" 1048576 %.6f)" "$(get "$id-r$r" all_secs)" "%.1f")"
			done
			echo "| granary, with a plan, job (plan made + readers; $(med plan_secs "$id") s to make the plan) | $(med job_files_s "$id") | $(med job_mibs "$id") | | | | | | | |"
		fi
	done
	echo
	echo "Ratios (each round's):"
	echo
	echo "| ratio | round by round | target | |"
	echo "|---|---|---|---|"
	for r in $(seq 1 "$ROUNDS"); do
		read -r rb _ < <(rawbest "$r")
		put "rawbest-r$r" mibs "$rb"
		put "rawbest-r$r" job_mibs "$rb"
		put "none1-r$r" job_files_s "$(get "none1-r$r" files_s)"
	done
	ratios job_mibs plan1 rawbest
	echo "| with a plan (job) / raw store (the round's best raw row), MiB/s | $RV | ≥ 0.9x | $(met "$RLOW" ">=" 0.9) |"
	ratios mibs plan1 rawbest
	echo "| with a plan (readers only) / raw store, MiB/s | $RV | | |"
	ratios job_files_s plan1 none1
	echo "| with a plan (job) / no plan, files/s | $RV | ≥ 3x | $(met "$RLOW" ">=" 3) |"
	ratios files_s plan1 none1
	echo "| with a plan (readers only) / no plan, files/s | $RV | | |"
	ratios p50 none1 plan1
	echo "| read p50: no plan / with a plan | $RV | | |"
	ratios p99 none1 plan1
	echo "| read p99: no plan / with a plan | $RV | | |"
	echo
	echo "## 2. Epoch 2: another shuffled order on the same mount"
	echo
	echo "Without a plan: the second order read on the mount of epoch 1. With a plan: \`granary plan" \
		"--replace\` of the epoch-1 plan with the second order, just before the readers. Minimum: what" \
		"any eviction policy must fetch with a cache of --cache-size bytes, every object read once in" \
		"the epoch: the stored bytes minus the cache ($STORED - $CACHE = $MIN2 bytes, $(mib "$MIN2") MiB;" \
		"the $MEM memory cache, which may hold a few objects more, is not counted). Median of the rounds." \
		"Evictions: the disk cache's during the epoch, of entries the plans had demoted (passed, needed" \
		"by no plan ahead) and of planned ones (needed furthest ahead)."
	echo
	echo "| what | store bytes | / minimum | target ≤ 1.10 | store GETs | files/s | read p50 ms | read p99 ms | disk cache hits / misses | evictions: all / demoted / planned |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for id in none2 plan2 rplan2; do
		[ $id = rplan2 ] && [ "$REMOUNT" != 1 ] && continue
		ids=""
		for r in $(seq 1 "$ROUNDS"); do ids="$ids $id-r$r"; done
		# shellcheck disable=SC2086
		w=$(verdict $ids)
		[ -n "$w" ] && w=" $(footnote "$id:$w")"
		case $id in
		none2) l="granary, no plan (today's policy)" ;;
		plan2) l="granary, with a plan (--replace)" ;;
		rplan2) l="diagnosis: with a plan, the mount restarted after epoch 1 on its disk cache (a new plan)" ;;
		esac
		x=$(div "$(med bytes "$id")" "$MIN2")
		case $id in
		plan2) t=$(met "$x" "<=" 1.10) ;;
		none2) t="(baseline)" ;;
		*) t="(diagnosis)" ;;
		esac
		echo "| $l$w | $(med bytes "$id") | $x | $t | $(med gets "$id") | $(med files_s "$id") | $(med p50 "$id") | $(med p99 "$id") | $(med dc_hits "$id") / $(med dc_misses "$id") | $(med dc_evictions "$id") / $(med dc_evict_demoted "$id") / $(med dc_evict_planned "$id") |"
	done
	echo
	if [ "$TROUNDS" = 0 ]; then
		echo "## 3. PyTorch DataLoader: not run (BENCH_PLAN_TORCH_ROUNDS=0, or no torch)"
		echo
	else
		echo "## 3. PyTorch DataLoader (bench/plan_torch.py)"
		echo
		echo "A torchvision DatasetFolder of the same files on a fresh mount (empty disk cache, page cache" \
			"dropped), a DataLoader with num_workers=4, batch_size=32, a loader returning each file's raw" \
			"bytes (no decode); RandomSampler(seed) alone, and the same RandomSampler wrapped in" \
			"granary.PlannedSampler (the same order, handed to the mount at the first batch; a get a file on" \
			"this --read-only mount). Epoch: from the loader's first iteration (the plan is sent there) to" \
			"its last batch. /usr/bin/python3, torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)," \
			"$TROUNDS round(s), one run of each per round; medians (of two, their mean)."
		echo
		echo "| sampler | epoch s | files/s | MiB/s | store GETs | store bytes / stored byte | GETs in flight |"
		echo "|---|---|---|---|---|---|---|"
		for id in torchnone torchplan; do
			ids=""
			for r in $(seq 1 "$TROUNDS"); do ids="$ids $id-r$r"; done
			# shellcheck disable=SC2086
			w=$(verdict $ids)
			[ -n "$w" ] && w=" $(footnote "$id:$w")"
			l=$([ $id = torchnone ] && echo "RandomSampler" || echo "granary.PlannedSampler(RandomSampler)")
			echo "| $l$w | $(med secs "$id" "$TROUNDS") | $(med files_s "$id" "$TROUNDS") | $(med mibs "$id" "$TROUNDS") | $(med gets "$id" "$TROUNDS") | $(div "$(med bytes "$id" "$TROUNDS")" "$STORED") | $(med inflight "$id" "$TROUNDS") |"
		done
		echo
		ratios files_s torchplan torchnone "$TROUNDS"
		echo "PlannedSampler / RandomSampler, files/s (each round's): $RV."
		echo
	fi
	for r in $(seq 1 "$ROUNDS"); do
		for id in none1 plan1 none2 plan2 rplan1 rplan2; do
			[ -f "$RES/$id-r$r" ] || continue
			l="round $r, $id: readers $(get "$id-r$r" secs) s, $(get "$id-r$r" files_s) files/s, $(get "$id-r$r" mibs) MiB/s, p50 $(get "$id-r$r" p50) ms, p99 $(get "$id-r$r" p99) ms"
			case $id in *plan*) l="$l; plan made in $(get "$id-r$r" plan_secs) s" ;; esac
			l="$l; store $(get "$id-r$r" gets) GETs of $(get "$id-r$r" keys) objects (at most $(get "$id-r$r" most) of one), $(get "$id-r$r" bytes) bytes, $(get "$id-r$r" inflight) in flight, first byte $(get "$id-r$r" ttfb) ms; CPU s: client $(get "$id-r$r" cpu_client), s3rver $(get "$id-r$r" cpu_s3), proxy $(get "$id-r$r" cpu_proxy)"
			l="$l; disk cache hits $(get "$id-r$r" dc_hits), misses $(get "$id-r$r" dc_misses), evictions $(get "$id-r$r" dc_evictions) (demoted $(get "$id-r$r" dc_evict_demoted), planned $(get "$id-r$r" dc_evict_planned)), entries demoted $(get "$id-r$r" dc_demoted), fills ranked out $(get "$id-r$r" dc_fill_ranked_out), fill skips $(get "$id-r$r" dc_fill_skips)"
			case $id in *plan*) l="$l; the plan after it: files $(get "$id-r$r" plan_files), place $(get "$id-r$r" plan_place), window $(get "$id-r$r" plan_window), prefetched $(get "$id-r$r" plan_prefetched), used $(get "$id-r$r" plan_used), wasted $(get "$id-r$r" plan_wasted), opens ready $(get "$id-r$r" plan_ready), waited $(get "$id-r$r" plan_waited)" ;; esac
			footnote "$l" >/dev/null
		done
		for t in $RAW_THREADS; do
			footnote "round $r, raw store, $t threads: $(get "raw$t-r$r" mibs) MiB/s, $(get "raw$t-r$r" objs) objects/s, p50 $(get "raw$t-r$r" p50) ms, p99 $(get "raw$t-r$r" p99) ms; s3rver CPU $(get "raw$t-r$r" cpu_s3) s for the puts, gets and deletes" >/dev/null
		done
	done
	for r in $(seq 1 "$TROUNDS"); do
		for id in torchnone torchplan; do
			footnote "PyTorch round $r, $id: $(get "$id-r$r" secs) s, $(get "$id-r$r" files_s) files/s; store $(get "$id-r$r" gets) GETs, $(get "$id-r$r" bytes) bytes, $(get "$id-r$r" inflight) in flight, first byte $(get "$id-r$r" ttfb) ms; CPU s: client $(get "$id-r$r" cpu_client), s3rver $(get "$id-r$r" cpu_s3)$([ $id = torchplan ] && echo "; the plan at the end: window $(get "$id-r$r" plan_window), prefetched $(get "$id-r$r" plan_prefetched), used $(get "$id-r$r" plan_used), wasted $(get "$id-r$r" plan_wasted), opens ready $(get "$id-r$r" plan_ready), waited $(get "$id-r$r" plan_waited)")" >/dev/null
		done
	done
	[ -f "$TMP/notes" ] && while read -r l; do footnote "$l" >/dev/null; done < <(sort -u "$TMP/notes")
	echo "Notes (figures round by round):"
	echo
	awk '{ print NR ". " $0 }' "$TMP/foot"
	echo
	echo "Settings: BENCH_PLAN_FILES=$NF BENCH_PLAN_MIN_KIB=$KMIN BENCH_PLAN_MAX_KIB=$KMAX BENCH_PLAN_THREADS=$T" \
		"BENCH_PLAN_WRITERS=$W BENCH_PLAN_ROUNDS=$ROUNDS BENCH_PLAN_TORCH_ROUNDS=$TROUNDS" \
		"BENCH_PLAN_RAW_THREADS='$RAW_THREADS' BENCH_PLAN_RAW_OBJECTS=$RAW_N BENCH_PLAN_CACHE_MEM=$MEM" \
		"BENCH_PLAN_REMOUNT=$REMOUNT BENCH_PLAN_HEADSTART=$HEAD."
}

REPORT=$OUT/plan-$STAMP.md
report >"$REPORT"
cat "$REPORT"
say "report: $REPORT (run took ${RUNTIME} s)"
