#!/bin/bash
# metadata.sh [BUILD_DIR] - the metadata workload of issue 35: create
# (touch), stat, list (ls -l, cold and warm), rename and unlink (rm -rf) of
# BENCH_META_FILES entries (default 100000) in one directory ("flat") and
# spread over 100 directories ("spread"), on the local disk, on the FUSE
# passthrough over the local disk (build/bench/passthrough -w: the same
# low-level API, capabilities and 1 s timeouts as granary's adapter; the
# FUSE baseline), on libfuse's own low-level passthrough (passthrough_ll,
# built at run time from the example source Debian's libfuse3-dev ships;
# the row is left out when that source is missing) and on granary
# (file:// pool on the local disk, Redis on a unix socket, the trash on as
# format leaves it: a user's mount), in the
# same run. Cold: the page cache dropped and, for the FUSE targets, a fresh
# mount. Seconds per step and the ratios to the local disk and to the
# passthrough, into bench/results/metadata-DATE.md.
#
# Knobs: BENCH_META_FILES, BENCH_META_LAYOUTS (flat spread),
# BENCH_META_TARGETS (local passthrough passthrough_ll granary, and
# granary-base when BENCH_META_BASE is set), BENCH_META_BASE=BINARY (another granary build,
# the row granary-base: before and after in one run), BENCH_META_ROUNDS (1;
# medians; every other round runs the targets in the reverse order), BENCH_META_MONITOR=1 (the granary rows: Redis round trips per
# entry of each step, from the client's metrics).
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
case $O in /*) ;; *) O=$ROOT/$O ;; esac
N=${BENCH_META_FILES:-100000}
LAYOUTS=${BENCH_META_LAYOUTS:-flat spread}
BASE=${BENCH_META_BASE:-}
TARGETS=${BENCH_META_TARGETS:-local passthrough passthrough_ll ${BASE:+granary-base} granary}
PLL_SRC=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
ROUNDS=${BENCH_META_ROUNDS:-1}
MONITOR=${BENCH_META_MONITOR:-0}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)
STEPS="create stat ls-cold ls-warm rename rm"

case $N in '' | *[!0-9]*) say "metadata: BENCH_META_FILES takes a number (got '$N')"; exit 2 ;; esac
[ "$N" -ge 100 ] || { say "metadata: BENCH_META_FILES must be at least 100"; exit 2; }
for b in granary bench/passthrough; do
	[ -x "$O/$b" ] || { say "metadata: '$O/$b' is missing: run 'make all' first"; exit 1; }
done
command -v python3 >/dev/null || { say "metadata: python3 is needed (the renames)"; exit 1; }

. "$ROOT/tests/lib/services.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-meta.XXXXXX")
TMP=$(realpath "$TMP") # granary's daemon names its mount point canonically
RES=$TMP/res
mkdir -p "$RES" "$OUT" "$TMP/bin"
# private copies, so that a rebuild during the run changes nothing
cp "$O/granary" "$O/bench/passthrough" "$TMP/bin/"
[ -z "$BASE" ] || cp "$BASE" "$TMP/bin/granary-base" ||
	{ say "metadata: cannot copy BENCH_META_BASE '$BASE'"; exit 1; }
G=$TMP/bin/granary PT=$TMP/bin/passthrough PLL=$TMP/bin/passthrough_ll
# libfuse's passthrough_ll, from the source of Debian's package (not a
# copy in this tree), run as shipped but for its source directory. It
# keeps a descriptor open for each inode the kernel knows (passthrough_hp
# raises its own limit; this example does not): it runs with as many as
# this shell may give, all the kernel allows when root.
ulimit -Hn "$(cat /proc/sys/fs/nr_open)" 2>/dev/null
PLL_FDS=$(ulimit -Hn)
case " $TARGETS " in *" passthrough_ll "*)
	no_pll=""
	if [ ! -r "$PLL_SRC" ]; then
		no_pll="no $PLL_SRC (libfuse3-dev's examples)"
	elif [ "$PLL_FDS" != unlimited ] && [ "$PLL_FDS" -lt $((N + N / 10 + 100)) ]; then
		no_pll="it keeps a descriptor per inode: $N entries need more than this shell's limit of $PLL_FDS (ulimit -Hn)"
	elif ! cc -O2 $(pkg-config --cflags fuse3) "$PLL_SRC" -o "$PLL" \
		$(pkg-config --libs fuse3) 2>"$TMP/pll.err"; then
		say "metadata: cannot build passthrough_ll: $(tail -2 "$TMP/pll.err")"
		exit 1
	fi
	if [ -n "$no_pll" ]; then
		say "metadata: no passthrough_ll row: $no_pll"
		TARGETS=$(echo " $TARGETS " | sed 's/ passthrough_ll / /')
	fi ;;
esac
MOUNTS=""
trap 'mounts_cleanup metadata' EXIT
trap 'exit 130' INT TERM

svc_start_redis "$TMP/redis" >/dev/null || exit 1

# the names, one list per layout: flat/fNNNNNN, or spread/dDD/fNNNNNN
# round-robin over 100 directories
seq -f 'f%07g' 1 "$N" >"$TMP/list-flat"
seq 1 "$N" | awk '{ printf "d%02d/f%07d\n", $1 % 100, $1 }' >"$TMP/list-spread"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ------------------------------------------------------------------------
# targets: mount (or not) on $TMP/mnt-T, the workload's root

db=0
tmount() { # TARGET: mounted afresh (the FUSE ones), its root on stdout
	local t=$1 mp=$TMP/mnt-$1
	mkdir -p "$mp"
	case $t in
	local) ;;
	passthrough)
		mkdir -p "$TMP/pt"
		"$PT" -w "$TMP/pt" "$mp" || return 1
		MOUNTS="$MOUNTS $mp" ;;
	passthrough_ll)
		mkdir -p "$TMP/pll"
		(ulimit -n "$PLL_FDS" && "$PLL" -o source="$TMP/pll" "$mp") || return 1
		MOUNTS="$MOUNTS $mp" ;;
	granary*)
		"$TMP/bin/$t" mount "$GRANARY_TEST_REDIS?db=$db" "$mp" --log "$TMP/$t.log" \
			--cache-dir "$TMP/cache-$t" --metrics "127.0.0.1:0" >/dev/null 2>>"$TMP/mount.err" ||
			{ say "metadata: $t mount failed (see $TMP/$t.log)"; return 1; }
		MOUNTS="$MOUNTS $mp" ;;
	esac
}
tumount() { # TARGET
	local mp=$TMP/mnt-$1
	case $1 in
	local) ;;
	passthrough*) fusermount3 -u "$mp" ;;
	granary*) "$G" umount "$mp" >/dev/null ;;
	esac
	MOUNTS=${MOUNTS/ $mp/}
}
tfresh() { tumount "$1" && drop && tmount "$1"; } # TARGET: cold

# round trips to Redis of the client serving target T so far (its
# metrics, at the address granary.stats names)
rtrips() {
	local addr
	addr=$(getfattr --absolute-names --only-values -n granary.stats "$TMP/mnt-$1" 2>/dev/null |
		sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p')
	curl -s "http://$addr/metrics" | sed -n 's/^granary_redis_round_trips_total{[^}]*} //p'
}

# step T L NAME CMD...: time CMD (in the layout's directory), record it
step() {
	local t=$1 l=$2 name=$3 t0 t1 c0=0 c1
	shift 3
	[ "$MONITOR" = 1 ] && [ "${t%-base}" = granary ] && c0=$(rtrips "$t")
	t0=$(now)
	if ! (cd "$TMP/mnt-$t" && "$@") 2>"$TMP/step.err"; then
		say "metadata: $t $l $name failed: $(tail -2 "$TMP/step.err")"
		put "$t-$l" failed 1
		return 1
	fi
	t1=$(now)
	put "$t-$l" "${name}_r$r" "$(echo "$t1 - $t0" | bc -l | xargs printf '%.2f')"
	if [ "$MONITOR" = 1 ] && [ "${t%-base}" = granary ]; then
		c1=$(rtrips "$t")
		put "$t-$l" "${name}_rt" "$(echo "($c1 - $c0) / $N" | bc -l | xargs printf '%.2f')"
	fi
	say "  $t $l $name $(get "$t-$l" "${name}_r$r") s"
}

# the steps, run in the target's root on layout L
do_create() { (cd "$1" && xargs -a "$TMP/list-$1" touch); }
do_stat() { (cd "$1" && xargs -a "$TMP/list-$1" stat -c %i >/dev/null); }
do_ls() { ls -lR "$1" >/dev/null; }
do_rename() {
	(cd "$1" && python3 -c '
import os, sys
for p in open(sys.argv[1]).read().split():
    d, _, f = p.rpartition("/")
    os.rename(p, (d + "/" if d else "") + "r" + f[1:])' "$TMP/list-$1")
}
do_rm() { rm -rf "$1"; }

run_layout() { # TARGET LAYOUT: the six steps, from a fresh mount
	local t=$1 l=$2 d err
	tmount "$t" || return 1
	mkdir -p "$TMP/mnt-$t/$l"
	if [ "$l" = spread ]; then
		for d in $(seq 0 99); do mkdir "$TMP/mnt-$t/$l/$(printf d%02d "$d")"; done
	fi
	drop
	step "$t" "$l" create do_create "$l" &&
		tfresh "$t" &&
		step "$t" "$l" stat do_stat "$l" &&
		tfresh "$t" &&
		step "$t" "$l" ls-cold do_ls "$l" &&
		step "$t" "$l" ls-warm do_ls "$l" &&
		step "$t" "$l" rename do_rename "$l" &&
		step "$t" "$l" rm do_rm "$l"
	err=$?
	tumount "$t"
	return $err
}

for r in $(seq 1 "$ROUNDS"); do
	# every other round in the reverse order: a machine whose load drifts
	# during a run favours no target
	order=$TARGETS
	[ $((r % 2)) = 1 ] || order=$(echo "$TARGETS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for t in $order; do
		for l in $LAYOUTS; do
			if [ "${t%-base}" = granary ]; then
				db=$((db + 1))
				"$G" format "$GRANARY_TEST_REDIS?db=$db" "meta$db" 2>>"$TMP/mount.err" \
					--storage "file://$TMP/pool-$db" --force >/dev/null ||
					{ say "metadata: granary format failed"; exit 1; }
			fi
			rm -rf "$TMP/pt" "$TMP/pll" "$TMP/mnt-local"
			say "metadata: round $r, $t, $l"
			run_layout "$t" "$l" || say "metadata: $t $l stopped"
		done
	done
done
for t in $TARGETS; do
	for l in $LAYOUTS; do
		for s in $STEPS; do median "$t-$l" "$s" "$ROUNDS"; done
	done
done

# ------------------------------------------------------------------------
# the report

ratio() { # A B: A / B, or n/a
	[ -n "$1" ] && [ -n "$2" ] && [ "$(echo "$2 > 0" | bc)" = 1 ] || { echo n/a; return; }
	echo "$1 / $2" | bc -l | xargs printf '%.2fx'
}
F=$OUT/metadata-$STAMP.md
cols=""
for c in local passthrough passthrough_ll ${BASE:+granary-base} granary; do
	case " $TARGETS " in *" $c "*) cols="$cols $c" ;; esac
done
pll=""
case " $cols " in *" passthrough_ll "*) pll=1 ;; esac
{
	echo "# Metadata of $N entries ($(date -u +%FT%TZ), $(nproc) cores, $(uname -r))"
	echo
	echo "Seconds (median of $ROUNDS round(s)) for $N entries in one directory (flat) and over 100 directories (spread): create = \`touch\` of all (xargs), stat = \`stat\` of each by name on a fresh mount, ls-cold = \`ls -lR\` after a fresh mount with the page cache dropped, ls-warm = the same again at once, rename = \`os.rename\` of each in its directory (python3), rm = \`rm -rf\` of the tree. local = the local disk ($(df -T "$TMP" | awk 'NR == 2 { print $2 }')); passthrough = build/bench/passthrough -w over it (libfuse's passthrough_hp is not packaged in Debian: this is ours, the same low-level API, capabilities and 1 s timeouts as granary's adapter; it keeps a file handle per file, not a descriptor, and opens it for each call: a syscall pair more than passthrough_hp)${pll:+; passthrough_ll = libfuse's low-level passthrough example, built from the source in Debian's libfuse3-dev and run as shipped (its 1 s timeout, 10 threads at most)}; granary = a file:// pool on the same disk, Redis on a unix socket, trash on (format's default), mounted as a user mounts it${BASE:+; granary-base = the same with the build \`$BASE\`}. Targets (issue 35, flat): ls-cold <= 2x local, create <= 3x local, rm <= 4x local."
	echo
	for l in $LAYOUTS; do
		echo "## $l"
		echo
		h="| step |" u="|---|"
		for c in $cols; do h="$h $c |" u="$u---|"; done
		h="$h passthrough / local |${pll:+ passthrough_ll / local |}${BASE:+ granary-base / local |} granary / local | granary / passthrough |"
		u="$u---|${pll:+---|}${BASE:+---|}---|---|"
		if [ "$MONITOR" = 1 ]; then
			h="$h${BASE:+ round trips / entry, base |} round trips / entry |"
			u="$u${BASE:+---|}---|"
		fi
		echo "$h"
		echo "$u"
		for s in $STEPS; do
			row="| $s |"
			for c in $cols; do v=$(get "$c-$l" "$s"); row="$row ${v:-n/a} |"; done
			lo=$(get "local-$l" "$s") pt=$(get "passthrough-$l" "$s") gr=$(get "granary-$l" "$s")
			row="$row $(ratio "$pt" "$lo") |"
			[ -z "$pll" ] || row="$row $(ratio "$(get "passthrough_ll-$l" "$s")" "$lo") |"
			[ -z "$BASE" ] || row="$row $(ratio "$(get "granary-base-$l" "$s")" "$lo") |"
			row="$row $(ratio "$gr" "$lo") | $(ratio "$gr" "$pt") |"
			if [ "$MONITOR" = 1 ]; then
				[ -z "$BASE" ] || row="$row $(get "granary-base-$l" "${s}_rt") |"
				row="$row $(get "granary-$l" "${s}_rt") |"
			fi
			echo "$row"
		done
		echo
		if [ "$ROUNDS" -gt 1 ]; then
			echo "Each round, in seconds (round 1 / round 2 / ...; even rounds ran the targets in the reverse order):"
			echo
			echo "| step |$(for c in $cols; do printf ' %s |' "$c"; done)"
			echo "|---|$(for c in $cols; do printf -- '---|'; done)"
			for s in $STEPS; do
				row="| $s |"
				for c in $cols; do
					v=$(for r in $(seq 1 "$ROUNDS"); do get "$c-$l" "${s}_r$r"; done | paste -sd/ | sed 's|/| / |g')
					row="$row ${v:-n/a} |"
				done
				echo "$row"
			done
			echo
		fi
	done
} | tee "$F"
say "metadata: wrote $F"
