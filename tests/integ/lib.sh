# shellcheck shell=bash
# lib.sh - shared helpers for the integration tests (tests/integ/t*.sh).
# Source it first thing: it finds the build, starts Redis (and s3rver when
# needed) unless run.sh already did, and registers a cleanup that unmounts
# every mount the test made, also when the test fails or times out.
#
# Env: GRANARY_BUILD (default: <repo>/build), GRANARY_STORAGE (file | s3,
# default file), GRANARY_TEST_REDIS/_SOCK and GRANARY_TEST_S3 (from run.sh),
# GRANARY_KEEP_TMP=1 keeps the test's temporary directory,
# GRANARY_MOUNT_ARGS adds options to every mount (e.g. -d).

set -eEu -o pipefail

TOPDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GRANARY_BUILD:-$TOPDIR/build}
case $BUILD in /*) ;; *) BUILD=$TOPDIR/$BUILD ;; esac
GRANARY=$BUILD/granary
# the same binary with the fault injection of tests/hooks/hooks.c
GRANARY_HOOKS=$BUILD/tests/hooks/granary
FSRAND=$BUILD/tests/fsrand
CLOSEALL=$BUILD/tests/closeall
GRANARY_STORAGE=${GRANARY_STORAGE:-file}
TEST_NAME=$(basename "$0" .sh)

. "$TOPDIR/tests/lib/services.sh"

TMP=$(mktemp -d "${GRANARY_INTEG_ROOT:-/tmp}/$TEST_NAME.XXXXXX")
# sanitizer builds (make SAN=1): reports of daemonized clients go to files,
# and any report fails the test
export ASAN_OPTIONS=${ASAN_OPTIONS:-log_path=$TMP/asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:log_path=$TMP/asan}
MOUNTS=""    # mount points to unmount at exit
BG_PIDS=""   # background helpers to stop at exit
OK_COUNT=0

# ------------------------------------------------------------------------
# reporting

ok() {
	OK_COUNT=$((OK_COUNT + 1))
	echo "  ok $OK_COUNT - $*"
}

# skip WHY: a check this run cannot make, reported as skipped (TAP's
# "# skip"; run.sh counts and lists them), never as passed.
skip() {
	OK_COUNT=$((OK_COUNT + 1))
	echo "  ok $OK_COUNT # skip $*"
}

fail() {
	echo "FAIL: $TEST_NAME [$GRANARY_STORAGE]: $*" >&2
	exit 1
}

# check_eq ACTUAL EXPECTED WHAT
check_eq() {
	[ "$1" = "$2" ] ||
		fail "$3: expected '$2', got '$1'"
}

# expect_errno TEXT CMD...: CMD must fail and its stderr mention TEXT (a
# strerror text such as "Permission denied").
expect_errno() {
	local text=$1 rc=0; shift
	"$@" >"$TMP/expect.out" 2>"$TMP/expect.err" || rc=$?
	[ "$rc" != 0 ] ||
		fail "'$*' succeeded, expected failure with '$text'"
	grep -qF -- "$text" "$TMP/expect.err" ||
		fail "'$*' failed (exit $rc) without '$text' in stderr: $(cat "$TMP/expect.err")"
}

# expect_exit CODES REGEX CMD...: CMD must exit with one of CODES ("1" or
# "1|2") and its stderr match the extended REGEX (case-insensitive).
expect_exit() {
	local codes=$1 re=$2 rc=0; shift 2
	"$@" >"$TMP/expect.out" 2>"$TMP/expect.err" || rc=$?
	[[ "|$codes|" == *"|$rc|"* ]] ||
		fail "'$*' exited $rc, expected $codes; stderr: $(head -c 600 "$TMP/expect.err")"
	grep -qiE -- "$re" "$TMP/expect.err" ||
		fail "'$*' (exit $rc): stderr does not match /$re/: $(head -c 600 "$TMP/expect.err")"
}

# wait_until SECONDS CMD...: retry CMD every 0.1 s until it succeeds.
wait_until() {
	local end=$(($(date +%s%N) / 1000000 + $1 * 1000)); shift
	until "$@" >/dev/null 2>&1; do
		[ $(($(date +%s%N) / 1000000)) -lt $end ] || return 1
		sleep 0.1
	done
}

# as_nobody CMD...: run as uid/gid 65534 without supplementary groups.
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
}

# random_file PATH BYTES: BYTES of random data.
random_file() {
	head -c "$2" /dev/urandom >"$1"
}

bg_track() {
	BG_PIDS="$BG_PIDS $1"
}

# tree_attrs DIR: one sorted line per entry: path, type, mode, size (not
# for directories, whose size is file-system specific), nlink, owner, link
# target. tree_mtimes DIR: path and mtime in whole seconds.
tree_attrs() {
	(cd "$1" && find . -printf '%P\t%y\t%m\t%s\t%n\t%U:%G\t%l\n' |
		awk -F '\t' -v OFS='\t' '$2 == "d" { $4 = "-" } { print }' | sort)
}
tree_mtimes() {
	(cd "$1" && find . -printf '%P %T@\n' | sed 's/\.[0-9]*$//' | sort)
}
# diff_mtimes LIST1 LIST2 (from tree_mtimes): print up to 5 entries whose
# mtimes differ as "path: X vs Y"; fail status when any differ.
diff_mtimes() {
	awk 'NR == FNR { t[$1] = $2; next }
	     t[$1] != $2 { if (n++ < 5) printf "%s: %s vs %s; ", $1, t[$1], $2 }
	     END { exit n > 0 }' "$1" "$2"
}

# ------------------------------------------------------------------------
# services, volumes, mounts

need_redis() {
	if [ -z "${GRANARY_TEST_REDIS:-}" ]; then
		svc_start_redis "$TMP/redis" || fail "cannot start redis"
	fi
}

need_s3() {
	if [ -z "${GRANARY_TEST_S3:-}" ]; then
		svc_start_s3rver "$TMP/s3" granary-test || fail "cannot start s3rver"
		export GRANARY_TEST_S3_DATA=$TMP/s3/data
	fi
}

# need_s3v4: the S3 server that verifies Signature V4 (run.sh's, else one
# of this test's own): GRANARY_TEST_S3V4 (bucket granary-test) and its
# _PORT, _ACCESS_KEY, _SECRET_KEY, _REGION; see tests/lib/services.sh.
need_s3v4() {
	[ -n "${GRANARY_TEST_S3V4:-}" ] && return 0
	svc_start_s3v4 "$TMP/s3v4" granary-test || fail "cannot start the V4-verifying S3 server"
}

# need_strict_s3: an s3rver of this test's own that checks signatures, so
# refuses a wrong secret (the shared one accepts any: see
# tests/lib/services.sh), over the same objects as the shared one; sets
# STRICT_S3 (s3+http://127.0.0.1:PORT). It refuses listings too, so format
# on the shared one (new_volume) and point mounts at the strict one
# (strict_url). Stopped at exit with the test's other services, by PID.
need_strict_s3() {
	need_s3
	[ -z "${STRICT_S3:-}" ] || return 0
	local url=$GRANARY_TEST_S3 port=$GRANARY_TEST_S3_PORT
	SVC_S3RVER_STRICT=1 SVC_S3RVER_DATA=$GRANARY_TEST_S3_DATA \
		svc_start_s3rver "$TMP/s3-strict" granary-test ||
		fail "cannot start a strict s3rver"
	STRICT_S3=$GRANARY_TEST_S3
	export GRANARY_TEST_S3=$url GRANARY_TEST_S3_PORT=$port
}

# strict_url URL: URL, an s3+http:// URL of the shared s3rver, on the
# strict one of need_strict_s3 (the same bucket, prefix and objects),
# signed with V2: s3rver checks V2 signatures and takes any V4 one.
strict_url() {
	local u="$STRICT_S3${1#"$GRANARY_TEST_S3"}"
	case $u in *\?*) echo "$u&sig=v2" ;; *) echo "$u?sig=v2" ;; esac
}

# Pick a Redis database no running test uses: a counter shared through a
# file when run.sh drives the tests, wrapping over dbs 1..63 (run.sh runs
# one test at a time on each Redis and counter, so a wrapped db belongs to
# a finished test and is flushed).
next_db() {
	local f=${GRANARY_INTEG_DBFILE:-$TMP/dbcounter} n
	(
		flock 9
		n=$(cat "$f" 2>/dev/null || echo 0)
		n=$((n + 1))
		echo "$n" >"$f"
		echo $((n % 63 + 1))
	) 9>>"$f.lock"
}

# new_volume NAME [FORMAT ARGS...]: format a fresh volume on the storage
# family $GRANARY_STORAGE; sets META, STORAGE, and DATA_DIRS (the local
# directories that hold its objects: the file:// pool, or s3rver's files).
# The trash is off (--trash-days ${TRASH_DAYS:-0}) unless ARGS or
# TRASH_DAYS say otherwise: most tests count the objects and the space a
# removal frees at once.
new_volume() {
	local name=$1 db trash=(--trash-days "${TRASH_DAYS:-0}"); shift
	[[ " $* " != *" --trash-days "* ]] || trash=()
	need_redis
	db=$(next_db)
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	META="$GRANARY_TEST_REDIS?db=$db"
	case $GRANARY_STORAGE in
	file)
		DATA_DIRS="$TMP/data-$name-a $TMP/data-$name-b"
		mkdir -p $DATA_DIRS
		STORAGE="file://$TMP/data-$name-a:$TMP/data-$name-b"
		;;
	s3)
		need_s3
		DATA_DIRS="${GRANARY_TEST_S3_DATA:-}/granary-test/$name-$$"
		STORAGE="$GRANARY_TEST_S3/granary-test/$name-$$"
		;;
	*) fail "unknown GRANARY_STORAGE '$GRANARY_STORAGE'" ;;
	esac
	"$GRANARY" format "$META" "$name" --storage "$STORAGE" "${trash[@]}" "$@" \
		>"$TMP/format-$name.out" 2>&1 ||
		fail "granary format $name failed: $(cat "$TMP/format-$name.out")"
}

# count_objects [blocks|packs]: number of data objects (block and pack
# objects, or one kind) the volume last made by new_volume holds in its
# store (s3rver keeps each object as a file + 2 sidecars; the temp file of
# a put a killed client left half done is no object).
count_objects() {
	local d n=0 kinds=${1:-blocks packs} k
	for d in $DATA_DIRS; do
		[ -d "$d" ] || continue
		for k in $kinds; do
			n=$((n + $(find "$d" -type f -path "*/$k/*" \
				! -name '*._S3rver_metadata.json' ! -name '*._S3rver_object.md5' \
				! -name '*.tmp*' ! -name '.granary-tmp.*' | wc -l)))
		done
	done
	echo "$n"
}

objects_equal() {
	[ "$(count_objects)" = "$1" ]
}

# stat_of MP SECTION FIELD: a counter from the "granary.stats" xattr of
# the client serving MP
stat_of() {
	getfattr --absolute-names --only-values -n granary.stats "$1" 2>/dev/null |
		tr -d ' \n' | sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9]*\).*/\1/p"
}

# rcli ARGS...: redis-cli on the database of the volume last made
rcli() { redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "${META##*db=}" "$@"; }

# quota_seen MP...: the client serving each MP enforces the quotas as they
# are now (the generation in its stats is the volume's quotagen); clients
# read it about once a second: wait_until 10 quota_seen MP...
quota_seen() {
	local mp g
	g=$(rcli GET quotagen)
	for mp; do
		[ "$(stat_of "$mp" quotas generation)" = "${g:-0}" ] || return 1
	done
}

# nobody_volume NAME: a new volume mounted at $M with --allow-other, its
# mount point reachable by uid 65534, holding root's 0700 directory
# "secret" (with a 0644 file k2) and a 0777 directory "pub".
nobody_volume() {
	chmod 0755 "$TMP" # nobody must reach the mount points
	new_volume "$1"
	M=$TMP/mnt
	mount_vol "$META" "$M" --allow-other
	chmod 0755 "$M"
	mkdir "$M/secret" && chmod 0700 "$M/secret"
	echo TOP >"$M/secret/k2" && chmod 0644 "$M/secret/k2"
	mkdir "$M/pub" && chmod 0777 "$M/pub"
}

# snapval SRC NAME: the value granary snapshot sets ("SRC" NUL "NAME"), in
# hex for setfattr -v.
snapval() { printf '%s\0%s' "$1" "$2" | od -An -tx1 | tr -d ' \n' | sed 's/^/0x/'; }

# mount_vol META MP [ARGS...]: mount and remember MP for the cleanup. The
# client logs to $TMP/log-<basename MP>.log, shown when the test fails.
mount_vol() {
	local meta=$1 mp=$2; shift 2
	mkdir -p "$mp"
	MOUNTS="$MOUNTS $mp"
	# each mount point is a node of its own: its own disk cache, kept
	# across remounts of the same mount point
	timeout 60 "$GRANARY" mount "$meta" "$mp" \
		--log "$TMP/log-$(basename "$mp").log" \
		--cache-dir "$TMP/cache-$(basename "$mp")" --cache-size 1G \
		${GRANARY_MOUNT_ARGS:-} "$@" \
		>"$TMP/mount.out" 2>&1 ||
		fail "granary mount $mp failed: $(cat "$TMP/mount.out")"
	is_mounted "$mp" ||
		fail "granary mount returned 0 but '$mp' is not a mount point"
}

umount_vol() {
	local mp=$1 m rest=""
	timeout 60 "$GRANARY" umount "$mp" >"$TMP/umount.out" 2>&1 ||
		fail "granary umount $mp failed: $(cat "$TMP/umount.out")"
	! is_mounted "$mp" ||
		fail "granary umount returned 0 but '$mp' is still mounted"
	for m in $MOUNTS; do
		[ "$m" = "$mp" ] || rest="$rest $m"
	done
	MOUNTS=$rest
}

# is_mounted MP: listed in the mount table (works for a dead FUSE daemon,
# where stat-based checks see "Transport endpoint is not connected").
is_mounted() {
	awk -v mp="$(realpath -m "$1")" '$5 == mp { found = 1 } END { exit !found }' \
		/proc/self/mountinfo
}

# PIDs of granary daemons serving MP (found by their command line).
mount_pids() {
	local p
	for p in /proc/[0-9]*; do
		# (2> first: a process that ended meanwhile is no message)
		tr '\0' '\n' 2>/dev/null <"$p/cmdline" |
			grep -qxF -- "$1" || continue
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" |
			grep -q "granary mount" || continue
		echo "${p#/proc/}"
	done
}

cleanup() {
	local rc=$? mp p log
	set +eE
	trap - ERR
	for p in $BG_PIDS; do kill "$p" 2>/dev/null; done
	for p in $BG_PIDS; do wait "$p" 2>/dev/null; done
	if [ "$rc" != 0 ]; then
		for log in "$TMP"/log-*.log; do
			[ -s "$log" ] || continue
			echo "--- last lines of $(basename "$log"):" >&2
			tail -n 25 "$log" >&2
		done
	fi
	for mp in $MOUNTS; do
		is_mounted "$mp" || continue
		local pids
		pids=$(mount_pids "$mp")
		timeout 30 "$GRANARY" umount "$mp" >/dev/null 2>&1 ||
			fusermount3 -uz "$mp" 2>/dev/null
		# a daemon that outlives its unmount is stopped by PID
		for p in $pids; do
			for _ in $(seq 1 50); do
				kill -0 "$p" 2>/dev/null || break
				sleep 0.1
			done
			kill "$p" 2>/dev/null
		done
	done
	svc_stop_all
	for log in "$TMP"/asan.*; do
		[ -s "$log" ] || continue
		echo "FAIL: $TEST_NAME [$GRANARY_STORAGE]: sanitizer report $(basename "$log"):" >&2
		head -n 40 "$log" >&2
		[ "$rc" != 0 ] || rc=1
	done
	if [ "${GRANARY_KEEP_TMP:-0}" = 1 ]; then
		echo "(kept $TMP)" >&2
	else
		rm -rf "$TMP" 2>/dev/null
	fi
	exit "$rc"
}

trap cleanup EXIT
trap 'exit 143' TERM INT
trap 'echo "FAIL: $TEST_NAME [$GRANARY_STORAGE]: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR

[ -x "$GRANARY" ] || fail "no granary binary at '$GRANARY' (make all)"
