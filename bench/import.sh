#!/bin/bash
# import.sh [BUILD_DIR] - granary import against its baselines (issue 35),
# all in one run, on s3rver behind bench/slowproxy (a real region's
# latency and per-connection bandwidth: bench/lib/slowstore.sh): small
# files (BENCH_IMP_SMALL, default 2000, of 128 KiB) and big ones
# (BENCH_IMP_BIG, default 2, of BENCH_IMP_BIG_MIB, 256 MiB), from a local
# directory and from an S3 prefix (another bucket of the same store, read
# through the proxy too), imported in process (META_URL PATH) and through
# a plain mount; against the raw store's PUT rate (build/bench/store_raw,
# 128 KiB or 4 MiB objects, the best of BENCH_IMP_RAW_THREADS) and cp -r
# into a plain mount and into a --writeback mount (then granary.sync, so
# that the bytes are in the store, as import's are when it returns).
# Medians of BENCH_IMP_ROUNDS (2) interleaved rounds (of an even count,
# the lower middle one); each target on a fresh volume. Prints a table and
# keeps it in bench/results/import-DATE.md, with the ratios against the
# targets (>= 0.8x the raw PUT rate for small files, >= 0.8x its
# bandwidth for big ones, objects <= 1/20 of the small files).
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $O in /*) ;; *) O=$ROOT/$O ;; esac
SMALL_N=${BENCH_IMP_SMALL:-2000}
BIG_N=${BENCH_IMP_BIG:-2}
BIG_MIB=${BENCH_IMP_BIG_MIB:-256}
ROUNDS=${BENCH_IMP_ROUNDS:-2}
RAW_THREADS=${BENCH_IMP_RAW_THREADS:-16 64}
THREADS=${BENCH_IMP_THREADS:-} # import's --threads; empty: its defaults
KINDS=${BENCH_IMP_KINDS:-small big}
TARGETS=${BENCH_IMP_TARGETS:-raw imp-local-vfs imp-local-mount imp-local-mount100 imp-s3-vfs imp-s3-mount cp-mount cp-writeback}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)
for b in granary bench/store_raw bench/slowproxy; do
	[ -x "$O/$b" ] || { echo "import: '$O/$b' is missing (make all)" >&2; exit 1; }
done

. "$ROOT/tests/lib/services.sh"
. "$ROOT/bench/lib.sh"
. "$ROOT/bench/lib/slowstore.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-import.XXXXXX")
TMP=$(realpath "$TMP")
RES=$TMP/res MOUNTS=""
mkdir -p "$RES" "$OUT" "$TMP/bin"
# private copies: a rebuild during the run changes nothing
cp "$O/granary" "$O/bench/store_raw" "$TMP/bin/"
G=$TMP/bin/granary RAW=$TMP/bin/store_raw
cleanup() { slowstore_stop; mounts_cleanup import; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------------
# the store, the data

svc_start_redis "$TMP/redis" >/dev/null || exit 1
slowstore_start "$TMP" granary src -- --total-mbps "${BENCH_IMP_TOTAL_MBPS:-0}" >/dev/null || exit 1
STORE=$SLOWSTORE_URL   # what every volume and the S3 source go through
S3DATA=$TMP/s3/data    # s3rver's files: the objects counted

say "import: making the data: $SMALL_N x 128 KiB, $BIG_N x $BIG_MIB MiB"
mkdir -p "$TMP/local/small" "$TMP/local/big"
for d in $(seq -w 0 19); do mkdir -p "$TMP/local/small/d$d"; done
head -c $((SMALL_N << 17)) /dev/urandom | split -a 5 -d -b 131072 - "$TMP/local/small/f"
i=0
for f in "$TMP"/local/small/f*; do # 20 directories
	mv "$f" "$TMP/local/small/d$(printf %02d $((i % 20)))/"
	i=$((i + 1))
done
for i in $(seq 1 "$BIG_N"); do
	head -c $((BIG_MIB << 20)) /dev/urandom >"$TMP/local/big/b$i"
done
for k in small big; do # the S3 source: bucket src, straight to s3rver
	python3 "$ROOT/tests/integ/importtree.py" s3put "$GRANARY_TEST_S3_PORT" src "$k" \
		"$TMP/local/$k" >/dev/null || { say "import: cannot put the S3 source"; exit 1; }
done
SMALL_BYTES=$((SMALL_N << 17)) BIG_BYTES=$((BIG_N * BIG_MIB << 20))

# ------------------------------------------------------------------------
# the targets

DB=0
fresh_volume() { # NAME: format a volume of its own, $META and $VOLDATA
	DB=$((DB % 60 + 1))
	META="$GRANARY_TEST_REDIS?db=$DB"
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$DB" flushdb >/dev/null
	"$G" format "$META" "$1" --storage "$STORE/granary/$1" --trash-days 0 >/dev/null 2>&1 ||
		{ say "import: format of $1 failed"; return 1; }
	VOLDATA=$S3DATA/granary/$1
}
mnt() { # MP [ARGS...]
	local mp=$1
	shift
	mkdir -p "$mp"
	MOUNTS="$MOUNTS $mp"
	"$G" mount "$META" "$mp" --log "$TMP/log-$(basename "$mp").log" \
		--cache-dir "$TMP/cache-$(basename "$mp")" "$@" >/dev/null 2>&1
}
umnt() { "$G" umount "$1" >/dev/null 2>&1; }
objects() { find "$VOLDATA" -type f \( -path '*/packs/*' -o -path '*/blocks/*' \) -name '*._S3rver_object' 2>/dev/null | wc -l; }
# the copy holds the source's files: their count, and 10 of them compared
check_copy() { # SRC_DIR COPY_DIR
	local n m f
	n=$(find "$1" -type f | wc -l) m=$(find "$2" -type f | wc -l)
	[ "$n" = "$m" ] || { echo "$m of $n files"; return 1; }
	for f in $(cd "$1" && find . -type f | shuf -n 10 --random-source=<(yes)); do
		cmp -s "$1/$f" "$2/$f" || { echo "'$f' differs"; return 1; }
	done
}

# settle: wait (up to 15 s) until s3rver has been idle for half a second:
# a run right after a heavy one (store_raw's 64 threads, a GC of node's)
# measured up to half of what it measured on an idle server
settle() {
	local a b
	for _ in $(seq 1 30); do
		a=$(awk '{ print $14 + $15 }' "/proc/$SLOWSTORE_S3_PID/stat" 2>/dev/null) || return 0
		sleep 0.5
		b=$(awk '{ print $14 + $15 }' "/proc/$SLOWSTORE_S3_PID/stat" 2>/dev/null) || return 0
		[ $((b - a)) -le $(($(getconf CLK_TCK) / 20)) ] && return 0
	done
}

# one KIND TARGET ROUND: run it, record files/s, MiB/s, objects
one() {
	local kind=$1 t=$2 r=$3 id=$1-$2 n bytes t0 t1 secs src name=$1-$2-$3 out
	if [ "$kind" = small ]; then n=$SMALL_N bytes=$SMALL_BYTES; else n=$BIG_N bytes=$BIG_BYTES; fi
	src=$TMP/local/$kind
	settle
	say "import: round $r, $kind files, $t"
	if [ "$t" = raw ]; then
		local bm=0 gm=0 cm=0 th out pl gl cl
		for th in $RAW_THREADS; do
			if [ "$kind" = small ]; then
				out=$("$RAW" -t "$th" -n "$n" -s 128K put,get,copy,delete "$STORE/granary" "raw-$name-$th" 2>"$TMP/err")
			else
				out=$("$RAW" -t "$th" -n $((bytes >> 22)) -s 4M put,get,copy,delete "$STORE/granary" "raw-$name-$th" 2>"$TMP/err")
			fi
			pl=$(grep '^op=put' <<<"$out") gl=$(grep '^op=get' <<<"$out") cl=$(grep '^op=copy' <<<"$out")
			[ -n "$pl" ] && [ -n "$gl" ] && [ -n "$cl" ] || { put "$id" failed "store_raw: $(head -c 200 "$TMP/err")"; return; }
			if awk -v a="$(field "$pl" mib_per_s)" -v b="$bm" 'BEGIN { exit !(a > b) }'; then
				bm=$(field "$pl" mib_per_s)
				put "$id" fps_r"$r" "$(field "$pl" objects_per_s)"
				put "$id" mibs_r"$r" "$bm"
				put "$id" threads_r"$r" "$th"
			fi
			if awk -v a="$(field "$gl" mib_per_s)" -v b="$gm" 'BEGIN { exit !(a > b) }'; then
				gm=$(field "$gl" mib_per_s)
				put "$id" gfps_r"$r" "$(field "$gl" objects_per_s)"
				put "$id" gmibs_r"$r" "$gm"
				put "$id" gthreads_r"$r" "$th"
			fi
			if awk -v a="$(field "$cl" mib_per_s)" -v b="$cm" 'BEGIN { exit !(a > b) }'; then
				cm=$(field "$cl" mib_per_s)
				put "$id" cfps_r"$r" "$(field "$cl" objects_per_s)"
				put "$id" cmibs_r"$r" "$cm"
				put "$id" cthreads_r"$r" "$th"
			fi
		done
		return
	fi
	fresh_volume "v-$name" || { put "$id" failed "format"; return; }
	case $t in
	imp-*-mount | cp-mount) mnt "$TMP/m-$name" ;;
	imp-local-mount100) mnt "$TMP/m-$name" --pack-window 100ms ;;
	cp-writeback) mnt "$TMP/m-$name" --writeback ;;
	esac
	t0=$(now)
	case $t in
	imp-local-vfs) "$G" import -q ${THREADS:+-t "$THREADS"} "$src" "$META" /ds >/dev/null 2>"$TMP/err" ;;
	imp-local-mount | imp-local-mount100) "$G" import -q ${THREADS:+-t "$THREADS"} "$src" "$TMP/m-$name/ds" >/dev/null 2>"$TMP/err" ;;
	imp-s3-vfs) "$G" import -q ${THREADS:+-t "$THREADS"} "$STORE/src/$kind" "$META" /ds >/dev/null 2>"$TMP/err" ;;
	imp-s3-mount) "$G" import -q ${THREADS:+-t "$THREADS"} "$STORE/src/$kind" "$TMP/m-$name/ds" >/dev/null 2>"$TMP/err" ;;
	cp-mount) cp -r "$src" "$TMP/m-$name/ds" 2>"$TMP/err" ;;
	cp-writeback)
		cp -r "$src" "$TMP/m-$name/ds" 2>"$TMP/err" &&
			setfattr -n granary.sync -v 1 "$TMP/m-$name" 2>>"$TMP/err" ;;
	esac
	local rc=$?
	t1=$(now)
	[ $rc = 0 ] || { put "$id" failed "exit $rc: $(head -c 200 "$TMP/err")"; umnt "$TMP/m-$name"; return; }
	case $t in
	*-vfs) mnt "$TMP/m-$name" ;;
	esac
	if ! out=$(check_copy "$src" "$TMP/m-$name/ds"); then
		put "$id" failed "wrong copy: $out"
	fi
	umnt "$TMP/m-$name"
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	put "$id" fps_r"$r" "$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')"
	put "$id" mibs_r"$r" "$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / s / 1048576 }')"
	put "$id" objects_r"$r" "$(objects)"
	rm -rf "$VOLDATA" # the store's disk: 9 GB for a whole run otherwise
}

# each round starts one target further down the list: none always runs
# right after the same one (s3rver's state after a run of PUTs)
read -r -a TL <<<"$TARGETS"
for r in $(seq 1 "$ROUNDS"); do
	for kind in $KINDS; do
		for i in $(seq 0 $((${#TL[@]} - 1))); do
			t=${TL[$(((i + r - 1) % ${#TL[@]}))]}
			[ "$kind" = big ] && [ "$t" = imp-local-mount100 ] && continue
			one "$kind" "$t" "$r"
		done
	done
done

# ------------------------------------------------------------------------
# the table

declare -A DESC=(
	[raw]="raw store: store_raw PUTs"
	[imp-local-vfs]="granary import, local dir, in process"
	[imp-local-mount]="granary import, local dir, through a mount"
	[imp-local-mount100]="granary import, local dir, through a mount with --pack-window 100ms"
	[imp-s3-vfs]="granary import, S3 prefix, in process"
	[imp-s3-mount]="granary import, S3 prefix, through a mount"
	[cp-mount]="cp -r into a plain mount"
	[cp-writeback]="cp -r into a --writeback mount, then granary.sync"
)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2fx", a / b; else print "—" }'; }
# copy_ratio TARGET VALUE COPY: ", 0.97x the raw copy" for an import from S3
copy_ratio() { case $1 in imp-s3-*) [ -n "$3" ] && echo ", $(ratio "$2" "$3") the raw copy" ;; esac; }
for kind in $KINDS; do
	for t in $TARGETS; do
		for k in fps mibs objects gfps gmibs cfps cmibs; do median "$kind-$t" "$k" "$ROUNDS"; done
	done
done
{
	echo "# granary import against its baselines ($STAMP)"
	echo
	echo "bench/import.sh: $SMALL_N files of 128 KiB (in 20 directories) and $BIG_N of $BIG_MIB MiB, from a"
	echo "local directory (page cache) and from an S3 prefix, into volumes on s3rver behind"
	echo "bench/slowproxy ($SLOWSTORE_DESC); the S3 source is another bucket of the same"
	echo "store, read through the proxy too. Import with ${THREADS:-its default} threads (256 in process; 128"
	echo "through a mount of 128 FUSE threads: four batches of 24 fsync'd at once). Medians of $ROUNDS interleaved"
	echo "rounds (of two: the lower), each target on a fresh volume, in one run on $(nproc)"
	echo "cores (shared with other work: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
	echo "Raw: build/bench/store_raw PUTs (then GETs) of 128 KiB (small) or 4 MiB (big)"
	echo "objects, the best of $RAW_THREADS threads. Objects: what the volume's store holds"
	echo "after the copy. An import from the S3 prefix has the one s3rver serve its GETs"
	echo "as well as its PUTs: its bound is the raw copy (store_raw copy: each object got"
	echo "and put back, every byte checked), beside which its rows give a second ratio."
	echo
	for kind in $KINDS; do
		raw_f=$(get "$kind-raw" fps) raw_m=$(get "$kind-raw" mibs)
		copy_f=$(get "$kind-raw" cfps) copy_m=$(get "$kind-raw" cmibs)
		echo "## $kind files"
		echo
		echo "| target | files/s | MiB/s | / raw PUT ($( [ "$kind" = small ] && echo files/s || echo MiB/s)) | objects stored | objects per file |"
		echo "|---|---|---|---|---|---|"
		for t in $TARGETS; do
			id=$kind-$t
			[ -f "$RES/$id" ] || continue
			if [ -n "$(get "$id" failed)" ]; then
				echo "| ${DESC[$t]} | n/a: $(get "$id" failed) | | | | |"
				continue
			fi
			f=$(get "$id" fps) m=$(get "$id" mibs) o=$(get "$id" objects)
			n=$SMALL_N
			[ "$kind" = big ] && n=$BIG_N
			if [ "$t" = raw ]; then
				echo "| ${DESC[$t]} ($(get "$id" threads_r1) threads) | $f | $m | 1.00x | — | — |"
				echo "| raw store: store_raw GETs, for the S3 source ($(get "$id" gthreads_r1) threads) | $(get "$id" gfps) | $(get "$id" gmibs) | $(ratio "$(get "$id" "$([ "$kind" = small ] && echo gfps || echo gmibs)")" "$([ "$kind" = small ] && echo "$raw_f" || echo "$raw_m")") | — | — |"
				echo "| raw store: store_raw copies (GET, then PUT), the S3 source's bound ($(get "$id" cthreads_r1) threads) | $(get "$id" cfps) | $(get "$id" cmibs) | $(ratio "$(get "$id" "$([ "$kind" = small ] && echo cfps || echo cmibs)")" "$([ "$kind" = small ] && echo "$raw_f" || echo "$raw_m")") | — | — |"
			elif [ "$kind" = small ]; then
				echo "| ${DESC[$t]} | $f | $m | $(ratio "$f" "$raw_f")$(copy_ratio "$t" "$f" "$copy_f") | $o | $(awk -v o="$o" -v n="$n" 'BEGIN { printf "1/%.1f", n / (o > 0 ? o : 1) }') |"
			else
				echo "| ${DESC[$t]} | $f | $m | $(ratio "$m" "$raw_m")$(copy_ratio "$t" "$m" "$copy_m") | $o | — |"
			fi
		done
		echo
	done
	echo "Targets (issue 35): small files >= 0.8x the raw PUT rate in files/s and"
	echo "objects <= 1/20 of the files; big files >= 0.8x the raw PUT bandwidth."
} | tee "$OUT/import-$STAMP.md"
