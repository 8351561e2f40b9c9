#!/bin/bash
# group.sh [BUILD_DIR] - the cache group's benchmark (issue 33): four
# members of one volume on this machine (four mounts, each with its own
# cache directory and loopback address 127.0.0.2..5), the store s3rver
# behind bench/slowproxy (a real region's first-byte delay and bandwidth
# cap), two datasets (many small files, packed; a few big ones). In one
# run, each against its baseline:
#   1. a cold shuffled epoch on all four members at once: the store's
#      bytes per byte of dataset, in a group and without one;
#   2. a second member's cold epoch after the first member's, against the
#      first's time and against a read from local NVMe (a mount without a
#      group reading again from its own warm disk cache);
#   3. granary warmup on one member of a group against one node's warmup
#      without a group (time, and the store's bytes);
# and the raw store through the same proxy. Every file of every epoch is
# checked by MD5 against the source. Prints a markdown table and writes
# it to bench/results/group-DATE.md. Starts its own Redis, s3rver and
# proxy; unmounts and stops all it started on exit. See bench/README.md.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$ROOT/$O ;; esac
NS=${BENCH_GROUP_FILES:-2000}     # small files
KIB=${BENCH_GROUP_KIB:-100}       # their mean size
NB=${BENCH_GROUP_BIG:-8}          # big files
BMIB=${BENCH_GROUP_BIG_MIB:-64}   # their size
T=${BENCH_GROUP_THREADS:-4}       # reader threads of each member
ROUNDS=${BENCH_GROUP_ROUNDS:-3}   # rounds of the timed figures
CACHE=${BENCH_GROUP_CACHE:-8G}    # --cache-size of every mount (its weight)
STEP_TIMEOUT=${BENCH_TIMEOUT:-900}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)
BUCKET=granary VOL=vol GROUP=bench
DATASETS=${BENCH_GROUP_DATASETS:-small big}
PARTS=${BENCH_GROUP_PARTS:-nogroup local group second warmup}

. "$ROOT/tests/lib/services.sh"
. "$HERE/lib.sh"
. "$HERE/lib/slowstore.sh"

for b in granary bench/readers bench/gen_dataset bench/slowproxy bench/store_raw; do
	[ -x "$O/$b" ] || { say "group: no $O/$b (make all)"; exit 1; }
done
"$O/bench/readers" -h | grep -q -- ' -m ' || { say "group: $O/bench/readers has no -m (make all)"; exit 1; }
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-group.XXXXXX")
RES=$TMP/res
MOUNTS=""
for n in 0 1 2 3 4; do MOUNTS="$MOUNTS $TMP/m$n"; done
cleanup() { keep_or_cleanup group; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RES" "$OUT" "$TMP/bin"
# private copies: a rebuild during the run changes nothing
cp "${BENCH_GROUP_GRANARY:-$O/granary}" "$TMP/bin/granary" || exit 1
cp "$O/bench/readers" "$O/bench/gen_dataset" "$TMP/bin/"
G=$TMP/bin/granary RD=$TMP/bin/readers
T_START=$(date +%s)

# ------------------------------------------------------------------------
# helpers

drop() { drop_pages "$TMP/notes"; }

# mnt N [ARGS...]: mount N at $TMP/mN, its own cache directory, read-only
mnt() {
	local n=$1
	shift
	mkdir -p "$TMP/m$n"
	"$G" mount "$META" "$TMP/m$n" --read-only --cache-dir "$TMP/cache-m$n" \
		--cache-size "$CACHE" --metrics off --log "$TMP/log-m$n.log" "$@" </dev/null >/dev/null 2>>"$TMP/mount.err" ||
		{ say "group: mount $n failed: $(tail -3 "$TMP/log-m$n.log" 2>/dev/null)"; exit 1; }
}
# gmnt N: member N of the group, at 127.0.0.(N+1), any free port
gmnt() { mnt "$1" --cache-group "$GROUP" --group-addr "127.0.0.$(($1 + 1)):0"; }
umnt() {
	timeout 300 "$G" umount "$TMP/m$1" >/dev/null 2>&1 ||
		{ say "group: umount of $TMP/m$1 failed"; exit 1; }
}
fresh() { rm -rf "$TMP/cache-m$1"; } # N: an empty cache, a new node id

# group_up: members 1..4 mounted with empty caches, each listing all four
group_up() {
	local n end
	for n in 1 2 3 4; do fresh "$n"; gmnt "$n"; done
	end=$(($(date +%s) + 30))
	for n in 1 2 3 4; do
		until [ "$(gstat "$TMP/m$n" group members)" = 4 ]; do
			[ "$(date +%s)" -lt "$end" ] ||
				{ say "group: member $n lists $(gstat "$TMP/m$n" group members) members after 30 s"; exit 1; }
			sleep 0.2
		done
	done
}
group_down() { local n; for n in 1 2 3 4; do umnt "$n"; done; }

# epoch ID N DS SEED: mount N reads dataset DS whole, T threads, in a
# shuffled order (SEED), every file checked by MD5 against the source:
# ID's secs, mibs, errors, bad (files with wrong bytes), hung
epoch() {
	local id=$1 n=$2 ds=$3 line rc=0
	line=$(timeout -k 10 "$STEP_TIMEOUT" "$RD" -m -t "$T" -S "$4" "$TMP/sums-$ds" \
		"$TMP/m$n/$ds" 2>"$TMP/err-$id") || rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		put "$id" hung 1
		say "group: $id: the epoch did not end within ${STEP_TIMEOUT}s"
		return 1
	fi
	put "$id" secs "$(field "$line" secs)"
	put "$id" mibs "$(field "$line" mib_per_s)"
	put "$id" errors "$(field "$line" errors)"
	put "$id" bad "$(field "$line" bad)"
	[ $rc = 0 ] || say "group: $id: $(head -3 "$TMP/err-$id")"
}

# all_epoch ID DS SEED: members 1..4 read DS at once (seeds SEED+N):
# ID-mN's figures, ID's wall secs (the slowest member)
all_epoch() {
	local id=$1 ds=$2 n t0 t1 pids=""
	t0=$(now)
	for n in 1 2 3 4; do
		epoch "$id-m$n" "$n" "$ds" $(($3 + n)) &
		pids="$pids $!"
	done
	for n in $pids; do wait "$n"; done
	t1=$(now)
	put "$id" secs "$(secs "$t0" "$t1")"
}

# store_mark; store_count ID: the proxy's successful GETs of the volume's
# objects since the mark: ID's gets, bytes, keys (distinct), most (of one)
store_mark() { sleep 0.5; MARK=$(slowstore_mark); }
store_count() {
	local g b k m
	sleep 0.5 # an answer is logged when it ends
	read -r g b k m < <(slowstore_gets "$MARK" "$BUCKET/$VOL/")
	put "$1" gets "$g"
	put "$1" bytes "$b"
	put "$1" keys "$k"
	put "$1" most "$m"
}

# peer_mark; peer_figs ID: the members' group counters since the mark
# (members 1/2/3/4), for the notes
PEER_FIGS="peer_hits peer_errors peer_skipped served served_fetches bad_from_peers"
peer_now() {
	local n f
	for f in $PEER_FIGS; do
		for n in 1 2 3 4; do echo "$f.$n $(gstat "$TMP/m$n" group "$f")"; done
	done
}
peer_mark() { peer_now >"$TMP/peer.mark"; }
peer_figs() {
	local n f v l="" a b
	peer_now >"$TMP/peer.now"
	for f in $PEER_FIGS; do
		v=""
		for n in 1 2 3 4; do
			a=$(awk -v k="$f.$n" '$1 == k { print $2 }' "$TMP/peer.mark")
			b=$(awk -v k="$f.$n" '$1 == k { print $2 }' "$TMP/peer.now")
			v="$v${v:+/}$((${b:-0} - ${a:-0}))"
		done
		l="$l $f $v;"
	done
	put "$1" peers "${l%;}"
}

# ------------------------------------------------------------------------
# the store, the datasets, the volume

say "group: starting Redis, s3rver and the proxy ..."
svc_start_redis "$TMP/redis" >/dev/null || exit 1
slowstore_start "$TMP" "$BUCKET" || exit 1
META="$GRANARY_TEST_REDIS?db=1"
"$G" format "$META" bench-group --storage "$SLOWSTORE_URL/$BUCKET/$VOL" >/dev/null || exit 1

say "group: the datasets: $NS small files (mean $KIB KiB), $NB files of $BMIB MiB ..."
mkdir -p "$TMP/src/big"
"$TMP/bin/gen_dataset" -n "$NS" -d 20 -m "$KIB" "$TMP/src/small" "$TMP/list-small" >/dev/null || exit 1
for i in $(seq 1 "$NB"); do
	head -c $((BMIB << 20)) /dev/urandom >"$TMP/src/big/f$i" || exit 1
done
(cd "$TMP/src/big" && find . -type f | sed 's|^\./||' | sort) >"$TMP/list-big"
for ds in $DATASETS; do
	(cd "$TMP/src/$ds" && xargs -d '\n' md5sum -- <"$TMP/list-$ds") >"$TMP/sums-$ds" || exit 1
	put "$ds" files "$(wc -l <"$TMP/list-$ds")"
	put "$ds" size "$(cd "$TMP/src/$ds" && xargs -d '\n' stat -c %s -- <"$TMP/list-$ds" | awk '{ s += $1 } END { print s }')"
done

# the copy in: one writer mount, 4 writers (small files share packs);
# each dataset's objects counted in s3rver's directory
objs() { find "$TMP/s3/data/$BUCKET/$VOL" -type f -name '*._S3rver_object' \( -path '*/packs/*' -o -path '*/blocks/*' \) -printf '%s\n' 2>/dev/null | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }'; }
say "group: copying them in through the proxy ..."
mkdir -p "$TMP/m0"
"$G" mount "$META" "$TMP/m0" --cache-dir "$TMP/cache-w" --cache-size "$CACHE" --metrics off \
	--log "$TMP/log-w.log" </dev/null >/dev/null 2>>"$TMP/mount.err" || { say "group: the writer's mount failed"; exit 1; }
read -r on0 ob0 < <(objs)
for ds in $DATASETS; do
	t0=$(now)
	l=$("$RD" -t 4 -c "$TMP/src/$ds" "$TMP/list-$ds" "$TMP/m0/$ds") || { say "group: the copy of $ds failed: $l"; exit 1; }
	t1=$(now)
	read -r on ob < <(objs)
	put "$ds" objects $((on - on0))
	put "$ds" stored $((ob - ob0))
	put "$ds" ingest "$(secs "$t0" "$t1")"
	on0=$on ob0=$ob
done
umnt 0
rm -rf "$TMP/cache-w"

# ------------------------------------------------------------------------
# the raw store through the same proxy (build/bench/store_raw)

say "group: the raw store through the proxy ..."
raw() { # LABEL THREADS COUNT SIZE
	local out
	out=$("$O/bench/store_raw" -t "$2" -n "$3" -s "$4" -S 77 put,get,delete \
		"$SLOWSTORE_URL/$BUCKET" "raw-$4-t$2" 2>"$TMP/raw.err") ||
		{ echo "| $1 | $2 | $3 x $4 | failed: $(head -1 "$TMP/raw.err") | | | |" >>"$TMP/raw"; return; }
	local gl
	gl=$(grep '^op=get' <<<"$out")
	echo "| $1 | $2 | $3 x $4 | $(field "$gl" objects_per_s) | $(field "$gl" mib_per_s) | $(field "$gl" p50_ms) | $(field "$gl" p99_ms) |" >>"$TMP/raw"
}
: >"$TMP/raw"
raw "GET of objects of 128 KiB" 4 200 128K
raw "GET of objects of 4 MiB" 1 16 4M
raw "GET of objects of 4 MiB" 4 32 4M

# ------------------------------------------------------------------------
# the parts (BENCH_GROUP_PARTS: which, in this order)

# nogroup: a cold epoch on all four mounts at once without a group
part_nogroup() {
	local n ds
	say "group: four mounts without a group, a cold epoch on all at once ..."
	for n in 1 2 3 4; do fresh "$n"; mnt "$n"; done
	for ds in $DATASETS; do
		drop
		store_mark
		all_epoch "nogroup-$ds" "$ds" 100
		store_count "nogroup-$ds"
	done
	for n in 1 2 3 4; do umnt "$n"; done
}

# local: the local NVMe read: a mount without a group whose cache holds
# the datasets (nogroup's mount 1, or filled here), mounted again
# (nothing in memory), page cache dropped
part_local() {
	local r ds
	say "group: local NVMe: a mount without a group on its warm cache ..."
	if [ ! -d "$TMP/cache-m1" ] || [ -z "$(get "nogroup-small" secs)" ]; then
		fresh 1
		mnt 1
		for ds in $DATASETS; do epoch "fill-$ds" 1 "$ds" 1; done
		umnt 1
	fi
	for r in $(seq 1 "$ROUNDS"); do
		mnt 1
		for ds in $DATASETS; do
			drop
			store_mark
			epoch "local-$ds-r$r" 1 "$ds" $((200 + r))
			store_count "local-$ds-r$r"
		done
		umnt 1
	done
}

# group: a cold epoch on all four members of a group at once
part_group() {
	local ds
	say "group: four members of a group, a cold epoch on all at once ..."
	group_up
	for ds in $DATASETS; do
		drop
		store_mark
		peer_mark
		all_epoch "group-$ds" "$ds" 300
		store_count "group-$ds"
		peer_figs "group-$ds"
	done
	group_down
}

# second: member 2's cold epoch after member 1's
part_second() {
	local r ds
	for r in $(seq 1 "$ROUNDS"); do
		say "group: member 1 reads all, then member 2 (round $r of $ROUNDS) ..."
		group_up
		for ds in $DATASETS; do
			drop
			store_mark
			epoch "first-$ds-r$r" 1 "$ds" $((400 + r))
			store_count "first-$ds-r$r"
			drop
			store_mark
			peer_mark
			epoch "second-$ds-r$r" 2 "$ds" $((500 + r))
			store_count "second-$ds-r$r"
			peer_figs "second-$ds-r$r"
		done
		group_down
	done
}

# warmup: granary warmup on one member of a group, against one node's
# without a group
warm() { # ID N DS: granary warmup of DS on mount N, timed, the store counted
	local t0 t1 rc=0
	drop
	store_mark
	t0=$(now)
	timeout -k 10 "$STEP_TIMEOUT" "$G" warmup -q "$TMP/m$2/$3" >/dev/null 2>"$TMP/warm.err" || rc=$?
	t1=$(now)
	[ $rc = 0 ] || { put "$1" failed "exit $rc: $(head -1 "$TMP/warm.err")"; say "group: $1: warmup failed (exit $rc): $(head -1 "$TMP/warm.err")"; }
	put "$1" secs "$(secs "$t0" "$t1")"
	store_count "$1"
}
part_warmup() {
	local r ds
	for r in $(seq 1 "$ROUNDS"); do
		say "group: warmup, one node without a group (round $r of $ROUNDS) ..."
		fresh 1
		mnt 1
		for ds in $DATASETS; do warm "warm1-$ds-r$r" 1 "$ds"; done
		umnt 1
		say "group: warmup on member 1 of a group (round $r of $ROUNDS) ..."
		group_up
		for ds in $DATASETS; do
			warm "warmg-$ds-r$r" 1 "$ds"
			# what the group holds then, and an epoch of member 2 from it
			put "warmg-$ds-r$r" check "$("$G" warmup --check --json "$TMP/m1/$ds" 2>/dev/null |
				sed -n 's/.*"group_bytes": *\([0-9]*\).*/\1/p')"
			drop
			store_mark
			epoch "afterwarm-$ds-r$r" 2 "$ds" $((600 + r))
			store_count "afterwarm-$ds-r$r"
		done
		group_down
	done
}

for part in $PARTS; do
	declare -F "part_$part" >/dev/null || { say "group: no part '$part' (known: nogroup local group second warmup)"; exit 1; }
	"part_$part"
done
RUNTIME=$(($(date +%s) - T_START))

# ------------------------------------------------------------------------
# report

# med KEY ID_PREFIX SUFFIX: the median over rounds of ID_PREFIX-rR's KEY
med() {
	local r v=""
	for r in $(seq 1 "$ROUNDS"); do v="$v $(get "$2-r$r" "$1")"; done
	[ -n "${v// /}" ] || return 0
	# shellcheck disable=SC2086 # one value a word
	mid $v
}
each() { # KEY ID_PREFIX: the rounds' values, "a / b"
	local r v=""
	for r in $(seq 1 "$ROUNDS"); do v="$v${v:+ / }$(get "$2-r$r" "$1")"; done
	echo "$v"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
# verdict ID...: "" when every epoch of those IDs read right, else what went wrong
verdict() {
	local id e b h w=""
	for id in "$@"; do
		e=$(get "$id" errors) b=$(get "$id" bad) h=$(get "$id" hung)
		[ -n "$h" ] && w="$w $id hung;"
		[ -n "$e" ] && [ "$e" != 0 ] && w="$w $id: $e errors ($b wrong bytes);"
		[ -z "$e" ] && [ -z "$h" ] && w="$w $id: no result;"
	done
	echo "$w"
}
met() { # VALUE OP TARGET
	awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN {
		if (v == "" || v == "—") { print "n/a"; exit }
		ok = (op == "<=") ? v <= t + 0.0005 : v >= t
		print ok ? "met" : "**NOT met**" }'
}

: >"$TMP/foot"
footnote() { echo "$1" >>"$TMP/foot"; echo "[$(wc -l <"$TMP/foot")]"; }

ran() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
# peers ID FIG: the sum over the members of a counter of ID's peer figures
peers() { get "$1" peers | tr ';' '\n' | awk -v f="$2" '$1 == f { n = split($2, v, "/"); for (i = 1; i <= n; i++) s += v[i]; print s + 0 }'; }

report() {
	local ds db st nm id w gm tg pe r f s l sb r1 r2 w1 wg b1 bg ids
	echo "# Cache group benchmark (issue 33), $STAMP"
	echo
	echo "The store: s3rver on loopback behind bench/slowproxy, **$SLOWSTORE_DESC** (bench/lib/slowstore.sh;" \
		"one proxy for every row, the raw store through it at the end). Four mounts of one volume on this" \
		"machine stand for four nodes: each its own cache directory (--cache-size $CACHE) and, in the" \
		"group, its own address 127.0.0.2..5 (--cache-group $GROUP --group-addr 127.0.0.N:0); all mounts" \
		"--read-only, other options default (--prefetch 8, --cache-mem 256M, the reader keeps no copy of" \
		"what peers send). Each member reads with $T threads (build/bench/readers -m) in a shuffled" \
		"order of its own, every file checked by MD5 against the source as it is read (in the timed" \
		"loop); the page cache is dropped before every timed read. Store bytes: the response bodies" \
		"of the successful GETs of the volume's objects in the proxy's log. $(nproc) cores shared with" \
		"other work (noisy), Linux $(uname -r); $("$G" --version 2>/dev/null); the run took ${RUNTIME} s."
	echo
	echo "| dataset | files | bytes | objects in the store | stored bytes |"
	echo "|---|---|---|---|---|"
	for ds in $DATASETS; do
		nm=$([ "$ds" = small ] && echo "small files (packed; mean $KIB KiB, lognormal)" || echo "big files ($BMIB MiB each)")
		echo "| $nm | $(get "$ds" files) | $(get "$ds" size) ($(mib "$(get "$ds" size)") MiB) | $(get "$ds" objects) | $(get "$ds" stored) |"
	done
	echo
	if ran nogroup || ran group; then
		echo "## 1. A cold epoch on all four members at once: the store's bytes per byte of dataset"
		echo
		echo "One run each. The target (1.0) is judged on the bytes the store holds (a dataset's objects" \
			"are its bytes and their block headers, 0.1% more): 1.000 of those is each object fetched" \
			"once, whole. Peer errors: asks to an owner that failed (each marks the owner down for 1 s:" \
			"its keys are read from the store meanwhile, skipped)."
		echo
		echo "| dataset | mounts | store bytes / dataset byte | store bytes / stored byte | GETs | objects got | most GETs of one object | epoch s (all four done) | member MiB/s (median) | peer errors / skipped | target: ≤ 1.0 |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|"
		for ds in $DATASETS; do
			db=$(get "$ds" size) st=$(get "$ds" stored)
			for id in "nogroup-$ds" "group-$ds"; do
				ran "${id%-"$ds"}" || continue
				w=$(verdict "$id-m1" "$id-m2" "$id-m3" "$id-m4")
				[ -n "$w" ] && w=" $(footnote "$id:$w")"
				gm=$(mid "$(get "$id-m1" mibs)" "$(get "$id-m2" mibs)" "$(get "$id-m3" mibs)" "$(get "$id-m4" mibs)")
				if [ "$id" = "group-$ds" ]; then
					nm="four members of a group"
					tg=$(met "$(div "$(get "$id" bytes)" "$st")" "<=" 1.0)
					pe="$(peers "$id" peer_errors) / $(peers "$id" peer_skipped)"
					footnote "$ds, group: the members' counters during the epoch (members 1/2/3/4):$(get "$id" peers)" >/dev/null
				else
					nm="four mounts, no group (baseline)"
					tg="(baseline: 4.0 expected)"
					pe="—"
				fi
				echo "| $ds | $nm$w | $(div "$(get "$id" bytes)" "$db") | $(div "$(get "$id" bytes)" "$st") | $(get "$id" gets) | $(get "$id" keys) | $(get "$id" most) | $(get "$id" secs) | $gm | $pe | $tg |"
			done
		done
		echo
	fi
	if ran second; then
		echo "## 2. A second member's cold epoch after the first member's"
		echo
		echo "Member 1 of a new group with empty caches reads the whole dataset, then member 2 does" \
			"(its blocks from the owners' caches: a quarter its own, the rest over loopback HTTP)." \
			"Local NVMe: a mount without a group reading the dataset again from its own warm disk" \
			"cache (mounted again: nothing in memory). Seconds: medians of $ROUNDS rounds, each round's" \
			"in a footnote. The last column is what member 1 / member 2 would be with peers as fast" \
			"as the local disk: where it is under 3x, the store is too fast against this machine's" \
			"local read for any group to reach 3x here."
		echo
		echo "| dataset | member 1 s | member 2 s | store bytes of member 2's epoch | member 1 / member 2 | target ≥ 3x | local NVMe s | local / member 2 (speed) | target ≥ 0.5x | member 1 / local NVMe |"
		echo "|---|---|---|---|---|---|---|---|---|---|"
		for ds in $DATASETS; do
			ids=""
			for r in $(seq 1 "$ROUNDS"); do
				ids="$ids first-$ds-r$r second-$ds-r$r"
				ran local && ids="$ids local-$ds-r$r"
			done
			# shellcheck disable=SC2086 # one id a word
			w=$(verdict $ids)
			[ -n "$w" ] && w=" $(footnote "$ds:$w")"
			f=$(med secs "first-$ds") s=$(med secs "second-$ds") l=$(med secs "local-$ds")
			sb=$(med bytes "second-$ds")
			r1=$(div "$f" "$s" "%.2f") r2=$(div "$l" "$s" "%.2f")
			footnote "$ds, seconds round by round: member 1 $(each secs "first-$ds"); member 2 $(each secs "second-$ds"); local NVMe $(each secs "local-$ds"); store bytes of member 1's epoch $(each bytes "first-$ds") (stored $(get "$ds" stored)), of the local reads $(each bytes "local-$ds")" >/dev/null
			for r in $(seq 1 "$ROUNDS"); do
				footnote "$ds, round $r, member 2's epoch, the members' counters (members 1/2/3/4):$(get "second-$ds-r$r" peers)" >/dev/null
			done
			echo "| $ds$w | $f | $s | $sb | ${r1}x | $(met "$r1" ">=" 3) | ${l:-—} | ${r2}x | $(met "$r2" ">=" 0.5) | $(div "$f" "$l" "%.2f")x |"
		done
		echo
	fi
	if ran warmup; then
		echo "## 3. Warmup: granary warmup on one member fills the group, against one node's warmup without a group"
		echo
		echo "Each round: a mount without a group and an empty cache runs \`granary warmup\` of the" \
			"dataset; then a new group of four with empty caches, and \`granary warmup\` on member 1;" \
			"then \`warmup --check\` on member 1 (bytes in the group) and a cold epoch of member 2" \
			"(page cache dropped). Medians of $ROUNDS rounds, each round's in a footnote."
		echo
		echo "| dataset | one node: warmup s | its store bytes / stored byte | group: warmup s | its store bytes / stored byte | group / one node, time | in the group after (warmup --check) | member 2's epoch after: s | its store bytes |"
		echo "|---|---|---|---|---|---|---|---|---|"
		for ds in $DATASETS; do
			ids=""
			db=$(get "$ds" size) st=$(get "$ds" stored)
			for r in $(seq 1 "$ROUNDS"); do
				ids="$ids afterwarm-$ds-r$r"
				for id in "warm1-$ds-r$r" "warmg-$ds-r$r"; do
					[ -n "$(get "$id" failed)" ] && footnote "$id: warmup failed: $(get "$id" failed)" >/dev/null
				done
			done
			# shellcheck disable=SC2086 # one id a word
			w=$(verdict $ids)
			[ -n "$w" ] && w=" $(footnote "$ds:$w")"
			w1=$(med secs "warm1-$ds") wg=$(med secs "warmg-$ds")
			b1=$(med bytes "warm1-$ds") bg=$(med bytes "warmg-$ds")
			footnote "$ds, warmup seconds round by round: one node $(each secs "warm1-$ds"), group $(each secs "warmg-$ds"); store bytes: one node $(each bytes "warm1-$ds"), group $(each bytes "warmg-$ds") (stored $st); bytes in the group after: $(each check "warmg-$ds") of $db" >/dev/null
			echo "| $ds$w | $w1 | $(div "$b1" "$st") | $wg | $(div "$bg" "$st") | $(div "$wg" "$w1" "%.2f")x | $(div "$(med check "warmg-$ds")" "$db" "%.3f") of it | $(med secs "afterwarm-$ds") | $(med bytes "afterwarm-$ds") |"
		done
		echo
	fi
	echo "## The raw store through the same proxy (build/bench/store_raw, a connection a thread, every byte checked)"
	echo
	echo "| what | threads | objects | GET obj/s | GET MiB/s | GET p50 ms | GET p99 ms |"
	echo "|---|---|---|---|---|---|---|"
	cat "$TMP/raw"
	echo
	[ -f "$TMP/notes" ] && while read -r l; do footnote "$l" >/dev/null; done < <(sort -u "$TMP/notes")
	if [ -s "$TMP/foot" ]; then
		awk '{ print NR ". " $0 }' "$TMP/foot"
		echo
	fi
	echo "Settings: BENCH_GROUP_FILES=$NS BENCH_GROUP_KIB=$KIB BENCH_GROUP_BIG=$NB BENCH_GROUP_BIG_MIB=$BMIB" \
		"BENCH_GROUP_THREADS=$T BENCH_GROUP_ROUNDS=$ROUNDS BENCH_GROUP_CACHE=$CACHE" \
		"BENCH_GROUP_PARTS='$PARTS'; the copy in (one mount, 4 writers) took" \
		"$(get small ingest) s (small) and $(get big ingest) s (big) through the proxy."
}

REPORT=$OUT/group-$STAMP.md
report >"$REPORT"
cat "$REPORT"
say "report: $REPORT (run took ${RUNTIME} s)"
