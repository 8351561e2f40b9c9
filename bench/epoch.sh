#!/bin/bash
# epoch.sh [BUILD_DIR] - the training-read benchmark: one image-like dataset
# ingested and read for two shuffled epochs on every target side by side
# (local disk, a plain FUSE passthrough over a copy on that disk, the raw
# object store, granary on s3rver and on file://, s3fs and rclone on the same
# s3rver), as a markdown table with ratios and a chart in bench/results/. See bench/README.md for the columns and knobs.
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $O in /*) ;; *) O=$ROOT/$O ;; esac
NF=${BENCH_FILES:-10000}
MEAN_KIB=${BENCH_MEAN_KIB:-128}
DIRS=${BENCH_DIRS:-100}
T=${BENCH_THREADS:-4}
ROUNDS=${BENCH_EPOCHS:-3}
INGESTS=${BENCH_INGESTS:-3}
W=${BENCH_WRITERS:-4}
STEP_TIMEOUT=${BENCH_TIMEOUT:-300}
TARGETS=${BENCH_TARGETS:-local passthrough raw granary-s3 granary-file s3fs rclone}
STAMP=$(date +%Y-%m-%d-%H%M)
OUT=${BENCH_OUT:-$ROOT/bench/results}
COLD_SEED=1001
WARM_SEED=2002

. "$ROOT/tests/lib/services.sh"
. "$ROOT/bench/lib.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-epoch.XXXXXX")
REG=$TMP/mounts # "kind mountpoint pid" of every mount made, for cleanup
RES=$TMP/res
S3PID=""
mkdir -p "$RES" "$OUT"
: >"$REG"

# ------------------------------------------------------------------------
# cleanup: every mount in the registry, then the services, by PID

# from the mount table: stat (mountpoint -q) fails on a mount whose daemon died
mounted() { awk -v mp="$1" '$2 == mp { f = 1 } END { exit !f }' /proc/self/mounts; }

unmount_one() { # KIND MP PID
	local kind=$1 mp=$2 pid=$3
	if mounted "$mp"; then
		if [ "$kind" = granary ]; then
			timeout 120 "$G" umount "$mp" >/dev/null 2>&1 ||
				fusermount3 -uz "$mp" 2>/dev/null
		else
			fusermount3 -u "$mp" 2>/dev/null ||
				fusermount3 -uz "$mp" 2>/dev/null
		fi
	fi
	[ "$pid" = - ] && return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill "$pid" 2>/dev/null
	sleep 1
	kill -9 "$pid" 2>/dev/null
	return 0
}

unmount_all() {
	local kind mp pid
	while read -r kind mp pid; do
		unmount_one "$kind" "$mp" "$pid"
	done <"$REG"
	: >"$REG"
}

cleanup() {
	trap - EXIT INT TERM
	unmount_all
	svc_stop_all
	# never rm -rf through a mount that would not go away
	if [ "${BENCH_KEEP:-0}" = 1 ] || findmnt -rn -o TARGET | grep -qF "$TMP/"; then
		say "kept $TMP"
	else
		rm -rf "$TMP"
	fi
}
# a signal stops the running target (a background subshell, whose
# children are ours too) at once, then cleanup runs
TPID=""
kill_tree() { # PID: children first, the parent stopped so it makes no more
	local c
	kill -STOP "$1" 2>/dev/null || return 0
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$c"; done
	kill -TERM "$1" 2>/dev/null
	kill -CONT "$1" 2>/dev/null
}
on_signal() {
	[ -n "$TPID" ] && kill_tree "$TPID"
	exit 130
}
trap cleanup EXIT
trap on_signal INT TERM

# ------------------------------------------------------------------------
# measuring helpers

drop() {
	timeout 60 sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null ||
		echo "page cache could not be dropped (not root?): cold and warm epochs may read cached pages" >>"$TMP/global-notes"
}

# readers ARGS...: run the timed loop under a timeout; its line on stdout.
readers() {
	local line rc=0
	line=$(timeout -k 10 "$STEP_TIMEOUT" "$RD" "$@" 2>"$TMP/readers.err") || rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		echo "timed out after ${STEP_TIMEOUT}s (BENCH_TIMEOUT): readers $*" >"$TMP/why"
		return 1
	elif [ $rc != 0 ]; then
		echo "readers failed (exit $rc): $(head -1 "$TMP/readers.err")" >"$TMP/why"
		return 1
	fi
	printf '%s\n' "$line"
}

s3log_mark() { wc -l <"$TMP/s3/s3rver.log"; }
# object GETs (not listings) for BUCKET logged after line FROM
s3log_gets() {
	tail -n +"$(($2 + 1))" "$TMP/s3/s3rver.log" | sed 's/\x1b\[[0-9;]*m//g' |
		grep -cE "^info: GET /$1/[^ ?]+ " || true
}

# object PUTs for BUCKET logged after line FROM
s3log_puts() {
	tail -n +"$(($2 + 1))" "$TMP/s3/s3rver.log" | sed 's/\x1b\[[0-9;]*m//g' |
		grep -cE "^info: PUT /$1/[^ ?]+ " || true
}

# wait_objects DIR N: until the store holds N objects under DIR (s3rver's
# files), those of earlier ingest rounds (DIR/iR) left out; for clients
# that upload after close().
wait_objects() {
	local end=$(($(date +%s) + STEP_TIMEOUT))
	while [ "$(find "$1" -path "$1/i[0-9]*" -prune -o -name 'img_*._S3rver_object' -print 2>/dev/null | wc -l)" -lt "$2" ]; do
		[ "$(date +%s)" -lt "$end" ] || { echo "objects did not reach the store within ${STEP_TIMEOUT}s" >"$TMP/why"; return 1; }
		sleep 0.2
	done
}

# verify DIR: a sample of the files read back equal the source
verify() {
	local f
	for f in $(awk 'NR % 97 == 1' "$LIST"); do
		cmp -s "$SRC/$f" "$1/$f" || { echo "DATA MISMATCH on $f" >"$TMP/why"; return 1; }
	done
}

warm_source() { "$RD" -t "$W" "$LIST" "$SRC" >/dev/null; }

# Every ingest starts with no dirty pages left by the targets before it
# (their writeback would compete with this one's fsyncs).
settle() { timeout 60 sync; }

# The common steps: ingest, then cold and warm epochs, on a directory.
# Ingest runs INGESTS rounds: the last into DIR, which the epochs read,
# each one before into DIR/iR (round_dir: a copy of its own, one level
# down; s3rver lists no deeper prefixes to rclone). A round's files/s
# counts the wait until the store has it all (WAIT_CMD) too; the median
# of the rounds is kept.
round_dir() { # DIR R
	if [ "$2" = "$INGESTS" ]; then echo "$1"; else echo "$1/i$2"; fi
}
ingest_round() { # ID DIR R [WAIT_CMD...]: ingest_rR, upload_wait_rR
	local id=$1 dir r=$3 l s w=0 t0 t1
	dir=$(round_dir "$2" "$3")
	shift 3
	settle
	warm_source
	l=$(readers -t "$W" -c "$SRC" "$LIST" "$dir") || return 1
	s=$(field "$l" secs)
	if [ $# -gt 0 ]; then
		t0=$(now)
		"$@" "$dir" "$r" || return 1
		t1=$(now)
		w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
		put "$id" "upload_wait_r$r" "$w"
	fi
	put "$id" "ingest_r$r" "$(awk -v n="$NF" -v s="$s" -v w="$w" 'BEGIN { printf "%.1f", n / (s + w) }')"
}
ingests() { # ID DIR [WAIT_CMD...]: every round, then the medians
	local id=$1 dir=$2 r
	shift 2
	for r in $(seq 1 "$INGESTS"); do ingest_round "$id" "$dir" "$r" "$@" || return 1; done
	median "$id" ingest "$INGESTS"
	median "$id" upload_wait "$INGESTS"
	median "$id" ingest_puts "$INGESTS"
}
epoch() { # ID cold|warm DIR BUCKET|- [SUFFIX]: KEY$SUFFIX for each figure
	local l mark=0 x=${5:-}
	drop
	[ "$4" != - ] && mark=$(s3log_mark)
	l=$(readers -t "$T" -S "$([ "$2" = cold ] && echo $COLD_SEED || echo $WARM_SEED)" "$LIST" "$3") || return 1
	put "$1" "$2$x" "$(field "$l" files_per_s)"
	put "$1" "$2_mib$x" "$(field "$l" mib_per_s)"
	[ "$4" != - ] && put "$1" "$2_gets$x" "$(s3log_gets "$4" "$mark")"
	return 0
}
# epochs ID DIR BUCKET|- [MOUNT_CMD...]: ROUNDS rounds of a cold and a warm
# epoch, each round after the first on a fresh mount (unmount_all, then
# MOUNT_CMD; none: the same directory, page cache dropped); the median of
# each figure is kept (one epoch on this machine swings by a tenth or
# more between runs). A sample of the files is compared in the first.
epochs() {
	local id=$1 dir=$2 b=$3 r k
	shift 3
	for r in $(seq 1 "$ROUNDS"); do
		if [ "$r" -gt 1 ] && [ $# -gt 0 ]; then
			unmount_all
			"$@"
		fi
		epoch "$id" cold "$dir" "$b" "_r$r"
		epoch "$id" warm "$dir" "$b" "_r$r"
		[ "$r" != 1 ] || verify "$dir"
	done
	for k in cold cold_mib cold_gets warm warm_mib warm_gets; do median "$id" "$k" "$ROUNDS"; done
}

# ------------------------------------------------------------------------
# targets: each runs in a subshell with set -e; results go to $RES/ID,
# the reason for an n/a to $TMP/why

t_local() {
	ingests "$1" "$TMP/local"
	touch "$TMP/local.done"
	epochs "$1" "$TMP/local" -
}

# The FUSE baseline: bench/passthrough (the capabilities, timeouts and
# thread pool of granary's mount) over the local disk's copy of the
# dataset, made here when the local target did not run before it.
t_passthrough() {
	local mp=$TMP/mnt-passthrough
	[ -x "$PT" ] || { echo "$O/bench/passthrough missing: run 'make all'" >"$TMP/why"; return 1; }
	if [ ! -f "$TMP/local.done" ]; then
		warm_source
		readers -t "$W" -c "$SRC" "$LIST" "$TMP/local" >/dev/null
		touch "$TMP/local.done"
	fi
	mkdir -p "$mp"
	"$PT" -f "$TMP/local" "$mp" </dev/null >>"$TMP/mnt-passthrough.log" 2>&1 &
	echo "passthrough $mp $!" >>"$REG"
	wait_mounted "$mp" $!
	epochs "$1" "$mp" -
}

t_raw() {
	local l r k url mark
	for r in $(seq 1 "$INGESTS"); do
		settle
		warm_source
		mark=$(s3log_mark)
		url=$(round_dir "s3+http://127.0.0.1:$S3PORT/raw" "$r")
		l=$(readers -t "$W" -s -c "$SRC" "$LIST" "$url")
		put "$1" "ingest_r$r" "$(field "$l" files_per_s)"
		put "$1" "ingest_puts_r$r" "$(s3log_puts raw "$mark")"
	done
	median "$1" ingest "$INGESTS"
	median "$1" ingest_puts "$INGESTS"
	for r in $(seq 1 "$ROUNDS"); do
		drop
		mark=$(s3log_mark)
		l=$(readers -t "$T" -s -S $COLD_SEED "$LIST" "$url")
		put "$1" "cold_r$r" "$(field "$l" files_per_s)"
		put "$1" "cold_mib_r$r" "$(field "$l" mib_per_s)"
		put "$1" "cold_gets_r$r" "$(s3log_gets raw "$mark")"
	done
	for k in cold cold_mib cold_gets; do median "$1" "$k" "$ROUNDS"; done
}

granary_mount() { # META MP [ARGS...]
	local meta=$1 mp=$2; shift 2
	mkdir -p "$mp"
	"$G" mount "$meta" "$mp" --log "$TMP/$(basename "$mp").log" "$@" </dev/null >/dev/null
	echo "granary $mp -" >>"$REG"
}

redis_used() { redis-cli -s "$GRANARY_TEST_REDIS_SOCK" INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
redis_keys_bytes() { # DB -> sum of MEMORY USAGE over every key
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$1" --scan |
		sed 's/.*/MEMORY USAGE "&" SAMPLES 0/' |
		redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$1" | awk '{ s += $1 } END { print s + 0 }'
}

# A node's granary caches (memory, and the disk cache where the client has
# one) start empty on every fresh mount here: the disk cache is private to
# the target and deleted before each mount.
granary_fresh() { # META MP [ARGS...]
	local cache=()
	if [ -n "$CACHE_OPT" ]; then
		rm -rf "$TMP/gcache"
		mkdir -p "$TMP/gcache"
		cache=(--cache-dir "$TMP/gcache")
	fi
	granary_mount "$@" "${cache[@]}"
}

t_granary() { # ID DB STORAGE_URL BUCKET|-
	local id=$1 db=$2 bucket=$4 meta="$GRANARY_TEST_REDIS?db=$2" mp=$TMP/mnt-$1 before t0 t1 mark tops
	"$G" format "$meta" "bench-$id" --storage "$3" >/dev/null
	# shellcheck disable=SC2086 # INGEST_ARGS is a list of flags
	granary_fresh "$meta" "$mp" $INGEST_ARGS
	before=$(redis_used)
	GPUTS=$(gstat "$mp" store puts)
	ingests "$id" "$mp" granary_wait "$id" "$mp"
	put "$id" redis_info $(( ($(redis_used) - before) / (NF * INGESTS) ))
	put "$id" redis_usage $(( $(redis_keys_bytes "$db") / (NF * INGESTS) ))
	unmount_all
	granary_fresh "$meta" "$mp" $RO
	epochs "$id" "$mp" "$bucket" granary_fresh "$meta" "$mp" $RO
	unmount_all
	if "$G" warmup --help >/dev/null 2>&1; then
		drop
		granary_fresh "$meta" "$mp" $RO
		[ "$bucket" != - ] && mark=$(s3log_mark)
		# the copy the epochs read, not the earlier ingest rounds'
		mapfile -t tops < <(cut -d/ -f1 "$LIST" | sort -u | sed "s|^|$mp/|")
		t0=$(now)
		timeout -k 10 "$STEP_TIMEOUT" "$G" warmup -q "${tops[@]}" >/dev/null 2>"$TMP/warmup.err" ||
			{ echo "granary warmup failed: $(head -1 "$TMP/warmup.err")" >"$TMP/why"; return 1; }
		t1=$(now)
		put "$id" warmup "$(awk -v a="$t0" -v b="$t1" -v n="$BYTES" 'BEGIN { printf "%.1f", n / 1048576 / (b - a) }')"
		[ "$bucket" != - ] && put "$id" warmup_gets "$(s3log_gets "$bucket" "$mark")"
		unmount_all
	else
		put "$id" warmup_na "granary warmup does not exist yet"
	fi
}
# granary_wait ID MP DIR R: with --writeback the ingest ends when the
# store has it all; the PUTs of round R
granary_wait() {
	local p
	setfattr -n granary.sync -v 1 "$2" 2>"$TMP/sync.err" ||
		{ echo "granary.sync failed: $(head -1 "$TMP/sync.err")" >"$TMP/why"; return 1; }
	p=$(gstat "$2" store puts)
	put "$1" "ingest_puts_r$4" $((p - GPUTS))
	GPUTS=$p
}
t_granary_s3() { t_granary "$1" 1 "s3+http://127.0.0.1:$S3PORT/granary" granary; }
t_granary_file() { t_granary "$1" 2 "file://$TMP/granary-file-data" -; }

# peer_ingest ID MP OBJDIR: the ingest rounds, each waiting until the
# store has it all (peer_wait ID OBJDIR DIR R; the PUTs of round R)
peer_ingest() {
	PMARK=$(s3log_mark)
	ingests "$1" "$2" peer_wait "$1" "$3"
}
peer_wait() {
	wait_objects "$(round_dir "$2" "$4")" "$NF" || return 1
	put "$1" "ingest_puts_r$4" "$(s3log_puts "$1" "$PMARK")"
	PMARK=$(s3log_mark)
}
wait_mounted() { # MP PID
	for _ in $(seq 1 100); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "mount did not come up (see $(basename "$1").log)" >"$TMP/why"
	return 1
}

s3fs_mount() { # MP
	mkdir -p "$1"
	s3fs s3fs "$1" -f -o passwd_file="$TMP/s3fs.passwd" -o use_path_request_style \
		-o url="http://127.0.0.1:$S3PORT" -o endpoint=us-east-1 \
		</dev/null >>"$TMP/$(basename "$1").log" 2>&1 &
	echo "s3fs $1 $!" >>"$REG"
	wait_mounted "$1" $!
}
t_s3fs() {
	command -v s3fs >/dev/null || { echo "s3fs not installed (apt-get install -y s3fs)" >"$TMP/why"; return 1; }
	echo S3RVER:S3RVER >"$TMP/s3fs.passwd"
	chmod 600 "$TMP/s3fs.passwd"
	s3fs_mount "$TMP/mnt-s3fs"
	peer_ingest "$1" "$TMP/mnt-s3fs" "$TMP/s3/data/s3fs"
	unmount_all
	s3fs_mount "$TMP/mnt-s3fs"
	epochs "$1" "$TMP/mnt-s3fs" s3fs s3fs_mount "$TMP/mnt-s3fs"
}

rclone_mount() { # MP
	rm -rf "$TMP/rclone-cache"
	mkdir -p "$1"
	env -u AWS_CA_BUNDLE rclone --config "$TMP/rclone.conf" mount rclone:rclone/dataset "$1" \
		--vfs-cache-mode full --vfs-write-back 0s --cache-dir "$TMP/rclone-cache" \
		</dev/null >>"$TMP/$(basename "$1").log" 2>&1 &
	echo "rclone $1 $!" >>"$REG"
	wait_mounted "$1" $!
}
t_rclone() {
	command -v rclone >/dev/null || { echo "rclone not installed (apt-get install -y rclone)" >"$TMP/why"; return 1; }
	printf '[rclone]\ntype = s3\nprovider = Other\nendpoint = http://127.0.0.1:%s\naccess_key_id = S3RVER\nsecret_access_key = S3RVER\n' \
		"$S3PORT" >"$TMP/rclone.conf"
	rclone_mount "$TMP/mnt-rclone"
	peer_ingest "$1" "$TMP/mnt-rclone" "$TMP/s3/data/rclone/dataset"
	unmount_all
	rclone_mount "$TMP/mnt-rclone"
	epochs "$1" "$TMP/mnt-rclone" rclone rclone_mount "$TMP/mnt-rclone"
}

run_target() { # ID
	local id=$1 fn rc t0
	fn=t_$(echo "$id" | tr - _)
	if ! declare -F "$fn" >/dev/null; then
		say "unknown target '$id' (known: local passthrough raw granary-s3 granary-file s3fs rclone)"
		return
	fi
	say "== $id"
	rm -f "$TMP/why"
	t0=$(date +%s)
	(
		set -eE
		trap - INT TERM
		trap 'rc=$?; [ -s "$TMP/why" ] || echo "failed: $BASH_COMMAND (exit $rc)" >"$TMP/why"; exit 1' ERR
		"$fn" "$id"
	) &
	TPID=$!
	wait "$TPID"
	rc=$?
	TPID=""
	unmount_all
	if [ $rc != 0 ]; then
		put "$id" failed "$(head -1 "$TMP/why" 2>/dev/null || echo "exit $rc")"
		say "   $id: n/a: $(head -1 "$TMP/why" 2>/dev/null)"
	fi
	say "   $id: $(($(date +%s) - t0)) s"
}

# ------------------------------------------------------------------------
# setup

for b in "$O/granary" "$O/bench/readers" "$O/bench/gen_dataset"; do
	[ -x "$b" ] || { say "missing $b: run 'make all' first"; exit 1; }
done
# private copies, so that a rebuild during the run changes nothing
mkdir -p "$TMP/bin"
cp "$O/granary" "$O/bench/readers" "$O/bench/gen_dataset" "$TMP/bin/"
G=$TMP/bin/granary RD=$TMP/bin/readers PT=$TMP/bin/passthrough
# optional: its target is n/a without it
[ -x "$O/bench/passthrough" ] && cp "$O/bench/passthrough" "$TMP/bin/"
T_START=$(date +%s)

say "generating $NF files (mean $MEAN_KIB KiB) in $DIRS directories ..."
SRC=$TMP/dataset LIST=$TMP/files.txt
GEN=$("$TMP/bin/gen_dataset" -n "$NF" -d "$DIRS" -m "$MEAN_KIB" "$SRC" "$LIST") || exit 1
BYTES=$(field "$GEN" bytes)

svc_start_redis "$TMP/redis" >/dev/null || exit 1
# s3rver like svc_start_s3rver (lenient: granary format lists the storage),
# but logging every request (to count GETs); FORCE_COLOR keeps the method
# in its log lines
S3BIN=$ROOT/.deps/node_modules/.bin/s3rver
[ -x "$S3BIN" ] || { say "s3rver missing: run tools/install-deps.sh"; exit 1; }
S3PORT=$(svc_free_port)
mkdir -p "$TMP/s3/data"
FORCE_COLOR=1 "$S3BIN" -d "$TMP/s3/data" -a 127.0.0.1 -p "$S3PORT" \
	--configure-bucket raw --configure-bucket granary \
	--configure-bucket s3fs --configure-bucket rclone \
	--allow-mismatched-signatures >"$TMP/s3/s3rver.log" 2>&1 &
S3PID=$!
SVC_PIDS="$SVC_PIDS $S3PID"
for _ in $(seq 1 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$S3PORT") 2>/dev/null && break
	sleep 0.05
done
(exec 3<>"/dev/tcp/127.0.0.1/$S3PORT") 2>/dev/null || { say "s3rver did not start"; exit 1; }
export GRANARY_S3_ACCESS_KEY=S3RVER GRANARY_S3_SECRET_KEY=S3RVER
RO=--read-only
# granary ingests with --writeback (durable on the node's disk at close,
# uploaded in packs in the background; the ingest time includes the wait
# for the uploads); BENCH_INGEST_ARGS= measures the default mode
INGEST_ARGS=${BENCH_INGEST_ARGS---writeback}
CACHE_OPT=""
"$G" mount --help 2>/dev/null | grep -q -- --cache-dir && CACHE_OPT=1
[ "${BENCH_GRANARY_RO:-1}" = 0 ] && RO=

for t in $TARGETS; do run_target "$t"; done
RUNTIME=$(($(date +%s) - T_START))

# ------------------------------------------------------------------------
# report

name() {
	case $1 in
	local) echo "local disk" ;;
	passthrough) echo "FUSE passthrough (local copy)" ;;
	raw) echo "raw store (s3rver, objstore GET/PUT)" ;;
	granary-s3) echo "granary on s3rver" ;;
	granary-file) echo "granary on file://" ;;
	s3fs) echo "s3fs on s3rver" ;;
	rclone) echo "rclone mount on s3rver" ;;
	*) echo "$1" ;;
	esac
}
fmt() { # VALUE [NA_TEXT]
	if [ -z "$1" ]; then echo "${2:-n/a}"
	else awk -v v="$1" 'BEGIN { printf (v >= 100 ? "%.0f" : "%.1f"), v }'; fi
}
ratio() { # A B
	if [ -z "$1" ] || [ -z "$2" ]; then echo "—"
	else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; fi
}

# footnote TEXT -> "[n]"; kept in a file, as callers run it in $(...)
: >"$TMP/foot"
footnote() { echo "$1" >>"$TMP/foot"; echo "[$(wc -l <"$TMP/foot")]"; }

# rounds KEY N: a footnote with every target's KEY_r1 .. KEY_rN
rounds() {
	local id r v l=""
	for id in $TARGETS; do
		ok "$id" && [ -n "$(get "$id" "$1_r1")" ] || continue
		v=""
		for r in $(seq 1 "$2"); do v="$v${v:+ / }$(fmt "$(get "$id" "$1_r$r")" "?")"; done
		l="$l${l:+; }$(name "$id") $v"
	done
	[ -z "$l" ] || footnote "$1 files/s, round by round: $l" >/dev/null
}

report() {
	local id na n ingest warm warmup gets wgets ri ru pf
	echo "# granary epoch benchmark, $STAMP"
	echo
	echo "$NF files in $DIRS directories, $(awk -v b="$BYTES" 'BEGIN { printf "%.1f MiB", b / 1048576 }') of random bytes" \
		"(mean $(field "$GEN" mean_kib) KiB, lognormal, min $(field "$GEN" min) B, max $(field "$GEN" max) B);" \
		"ingest with $W writers, epochs with $T reader threads in a shuffled order;" \
		"$(nproc) cores, Linux $(uname -r); $("$G" --version 2>/dev/null); run took ${RUNTIME} s."
	echo
	echo "| target | ingest files/s | ingest PUTs/file | cold files/s | cold MiB/s | GETs | warm files/s | warm GETs | warmup MiB/s | Redis B/file | Redis B/file (MEMORY USAGE) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for id in $TARGETS; do
		[ -f "$RES/$id" ] || continue
		na=$(get "$id" failed)
		if [ -n "$na" ]; then
			n=$(footnote "$(name "$id"): n/a: $na")
			echo "| $(name "$id") $n | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a |"
			continue
		fi
		warm=$(fmt "$(get "$id" warm)" "—")
		[ "$id" = raw ] && warm="— $(footnote "raw store: no cache, a second epoch is the same GETs again")"
		ingest=$(fmt "$(get "$id" ingest)")
		[ "$id" = passthrough ] &&
			ingest="— $(footnote "$(name "$id"): build/bench/passthrough, read-only, over the files the local disk row wrote (granary's FUSE capabilities, 3600 s timeouts, 128 threads): no ingest")"
		warmup="—"
		case $id in granary-*)
			if [ -n "$(get "$id" warmup_na)" ]; then
				warmup="n/a $(footnote "$(name "$id"): $(get "$id" warmup_na)")"
			else
				warmup=$(fmt "$(get "$id" warmup)")
				[ -n "$(get "$id" warmup_gets)" ] &&
					warmup="$warmup $(footnote "$(name "$id"): warmup issued $(get "$id" warmup_gets) object GETs")"
			fi ;;
		esac
		gets=$(get "$id" cold_gets); wgets=$(get "$id" warm_gets)
		case $id in local|passthrough|granary-file) gets="n/a"; wgets="n/a" ;; esac
		ri=$(get "$id" redis_info); ru=$(get "$id" redis_usage)
		pf=$(get "$id" ingest_puts)
		[ -n "$pf" ] && pf=$(awk -v p="$pf" -v n="$NF" 'BEGIN { printf "%.3f", p / n }')
		echo "| $(name "$id") | $ingest | ${pf:-—} | $(fmt "$(get "$id" cold)") | $(fmt "$(get "$id" cold_mib)") |" \
			"${gets:-—} | $warm | ${wgets:-—} | $warmup | ${ri:-—} | ${ru:-—} |"
	done
	echo
	echo "Ratios (files/s of the target over files/s of the reference; higher is better):"
	echo
	echo "| target | ingest vs local | ingest vs raw | cold vs local | cold vs raw | warm vs local | warm vs raw | warm vs passthrough warm |"
	echo "|---|---|---|---|---|---|---|---|"
	local li lc lw ri_ rc_ pw tgt=""
	li=$(get local ingest); lc=$(get local cold); lw=$(get local warm)
	ri_=$(get raw ingest); rc_=$(get raw cold); pw=$(get passthrough warm)
	for id in $TARGETS; do
		ok "$id" || continue
		echo "| $(name "$id") | $(ratio "$(get "$id" ingest)" "$li") | $(ratio "$(get "$id" ingest)" "$ri_") |" \
			"$(ratio "$(get "$id" cold)" "$lc") | $(ratio "$(get "$id" cold)" "$rc_") |" \
			"$(ratio "$(get "$id" warm)" "$lw") | $(ratio "$(get "$id" warm)" "$rc_") |" \
			"$(ratio "$(get "$id" warm)" "$pw") |"
		case $id in granary-*)
			[ -n "$pw" ] && [ -n "$(get "$id" warm)" ] &&
				tgt="$tgt${tgt:+, }$(name "$id") $(ratio "$(get "$id" warm)" "$pw")" ;;
		esac
	done
	echo
	if [ -n "$tgt" ]; then
		echo "Target: granary's warm epoch (from its disk cache) at least 0.90x the FUSE passthrough's warm epoch: $tgt."
		echo
	fi
	for id in s3fs rclone granary-s3 granary-file; do
		[ -n "$(get "$id" upload_wait)" ] && footnote "$(name "$id"): each ingest round includes the wait, after the copy, until every object was in the store (median $(get "$id" upload_wait) s)" >/dev/null
	done
	rounds ingest "$INGESTS"
	rounds cold "$ROUNDS"
	[ -n "$INGEST_ARGS" ] && footnote "granary ingests with '$INGEST_ARGS': close returns once the file is fsync'd on the node's disk and in the metadata; packs upload in the background" >/dev/null
	[ -f "$TMP/global-notes" ] && while read -r l; do footnote "$l" >/dev/null; done < <(sort -u "$TMP/global-notes")
	awk '{ print NR ". " $0 }' "$TMP/foot"
	echo
	echo "Columns: see bench/README.md. GETs: object GETs s3rver logged during the epoch." \
		"Cold: a fresh mount with empty client caches${CACHE_OPT:+ (granary: a private --cache-dir, emptied)}" \
		"and the page cache dropped; warm: a second epoch on the same mount in a new order, page cache dropped." \
		"Every epoch figure (cold, warm, the raw store's GETs; files/s, MiB/s, GETs) is the median of $ROUNDS rounds (BENCH_EPOCHS), each on a fresh mount. Ingest (files/s, PUTs) is the median of $INGESTS rounds (BENCH_INGESTS), each a new copy of the dataset in its own directory; the epochs read the last one; Redis bytes per file are over all the copies. Warmup runs once." \
		"Granary epochs and warmup run on ${RO:+read-only }mounts; rclone uses --vfs-cache-mode full --vfs-write-back 0s."
}

REPORT=$OUT/epoch-$STAMP.md
report >"$REPORT"
cat "$REPORT"

# chart: files/s per target and phase, log scale
if command -v gnuplot >/dev/null; then
	q() { if [ -n "$1" ]; then echo "$1"; else echo "?"; fi; }
	for id in $TARGETS; do
		ok "$id" || continue
		printf '"%s" %s %s %s\n' "$(name "$id" | sed 's/ (.*//')" \
			"$(q "$(get "$id" ingest)")" "$(q "$(get "$id" cold)")" "$(q "$(get "$id" warm)")"
	done >"$TMP/chart.dat"
	gnuplot <<EOF 2>"$TMP/gnuplot.err" || say "chart skipped: gnuplot failed: $(head -1 "$TMP/gnuplot.err")"
set terminal pngcairo size 1100,560 font "sans,10"
set output "$OUT/epoch-$STAMP.png"
set title "granary epoch benchmark $STAMP: $NF files, mean $MEAN_KIB KiB, $T readers / $W writers"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set datafile missing "?"
set logscale y
set ylabel "files/s (log scale)"
set yrange [1:*]
set grid ytics
set key top right
set xtics nomirror
plot "$TMP/chart.dat" using 2:xtic(1) title "ingest", '' using 3 title "cold epoch", '' using 4 title "warm epoch"
EOF
	[ -s "$OUT/epoch-$STAMP.png" ] && say "chart: $OUT/epoch-$STAMP.png"
else
	say "chart skipped: gnuplot is not installed (apt-get install -y gnuplot-nox)"
fi
say "report: $REPORT (run took ${RUNTIME} s)"
