# bench/lib.sh - sourced by the benchmark scripts: messages, clocks, and
# the results of a run, kept as KEY=VALUE lines in $RES/ID (one file per
# target; the last value of a key wins).

say() { printf '%s\n' "$*" >&2; }
now() { date +%s.%N; }
put() { echo "$2=$3" >>"$RES/$1"; }                             # ID KEY VALUE
get() { sed -n "s/^$2=//p" "$RES/$1" 2>/dev/null | tail -1; }   # ID KEY
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; } # LINE KEY: KEY= of a tool's line

ok() { [ -f "$RES/$1" ] && [ -z "$(get "$1" failed)" ]; }        # ID: it ran, no n/a

# mid NUMBER...: their median (of an even count, the lower middle one)
mid() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# median ID KEY N: put KEY, the median of KEY_r1 .. KEY_rN (nothing when
# no round recorded one)
median() {
	local r v=""
	for r in $(seq 1 "$3"); do v="$v $(get "$1" "$2_r$r")"; done
	[ -n "${v// /}" ] || return 0
	# shellcheck disable=SC2086 # the values, one word each
	put "$1" "$2" "$(mid $v)"
}

gstat() { # MP SECTION FIELD: a counter of a granary client's "granary.stats"
	getfattr --absolute-names --only-values -n granary.stats "$1" 2>/dev/null |
		tr -d ' \n' | sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9]*\).*/\1/p"
}

# mounts_cleanup NAME: the EXIT trap of a script that mounted $MOUNTS with
# $G under $TMP and started services: unmount them, stop the services, and
# remove $TMP unless a mount would not go away (never rm -rf through it).
mounts_cleanup() {
	local mp
	set +e # a killed service's wait status must not stop the cleanup
	for mp in $MOUNTS; do
		"$G" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp" 2>/dev/null || true
	done
	svc_stop_all
	for mp in $MOUNTS; do
		if awk -v mp="$mp" '$2 == mp { f = 1 } END { exit !f }' /proc/self/mounts; then
			echo "$1: '$mp' is still mounted; left $TMP" >&2
			return
		fi
	done
	rm -rf "$TMP"
}

# keep_or_cleanup NAME: the EXIT trap of a script that honours BENCH_KEEP=1
# (unmount and stop, but leave $TMP for a look at its logs) and otherwise
# cleans up as mounts_cleanup does.
keep_or_cleanup() {
	local mp
	trap - EXIT INT TERM
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		mounts_cleanup "$1" # unmounts, stops, removes $TMP
		return
	fi
	for mp in $MOUNTS; do
		"$G" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp" 2>/dev/null
	done
	svc_stop_all
	say "kept $TMP"
}

# drop_pages NOTES: the page cache dropped (after a sync of at most 60 s);
# when it cannot be, a line saying so goes to file NOTES.
drop_pages() {
	timeout 60 sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null ||
		echo "the page cache could not be dropped (not root?): reads may come from it" >>"$1"
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; } # T0 T1
# A B [FORMAT]: A / B, or "—" when either is missing or B is 0
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN { if (a == "" || b == "" || b == 0) print "—"; else printf f, a / b }'; }
