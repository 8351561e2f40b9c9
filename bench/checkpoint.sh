#!/bin/bash
# checkpoint.sh [BUILD_DIR] - the checkpoint workload of issue 4: save one
# big file of random bytes with fsync, and 8 files of an eighth of it at
# once; read them back cold and warm; the granary daemon's peak RSS while
# saving; snapshot times of the big file and of a tree of small files. On
# the local disk, granary on file:// and on s3rver, the raw stores (parallel
# PUT/GET of 4 MiB objects, build/bench/objparts), s3fs and rclone mount on
# the same s3rver. Granary's saves of 1 and of 8 files are each paired with
# the same save to the local disk and a raw parallel PUT just before them
# (issue 35: >= 0.9x of both). BENCH_CKPT_READS=0: saves only. Report:
# bench/results/checkpoint-DATE.md; knobs and columns in bench/README.md.
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
case $O in /*) ;; *) O=$ROOT/$O ;; esac
MB=${BENCH_CKPT_MB:-2048}
NTREE=${BENCH_CKPT_TREE:-10000}
T=${BENCH_CKPT_THREADS:-8}
BUF=${BENCH_CKPT_BUFFER:-256M}
TARGETS=${BENCH_CKPT_TARGETS:-local raw-file passthrough granary-file raw-s3 granary-s3 s3fs rclone}
READS=${BENCH_CKPT_READS:-3}
SAVES=${BENCH_CKPT_SAVES:-3}
STEP_TIMEOUT=${BENCH_TIMEOUT:-900}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)

case $READS in [0-9] | [1-9][0-9]) ;; *) say "checkpoint: BENCH_CKPT_READS takes 0 to 99 (got '$READS')"; exit 2 ;; esac
case $SAVES in [1-9] | [1-9][0-9]) ;; *) say "checkpoint: BENCH_CKPT_SAVES takes 1 to 99 (got '$SAVES')"; exit 2 ;; esac
[ "$MB" -ge 8 ] && [ $((MB % 8)) = 0 ] ||
	{ say "checkpoint: BENCH_CKPT_MB must be a multiple of 8 (got '$MB')"; exit 2; }
case $BUF in
*[Gg]) BUF_MIB=$((${BUF%?} * 1024)) ;;
*[Mm]) BUF_MIB=${BUF%?} ;;
*) say "checkpoint: BENCH_CKPT_BUFFER takes M or G (got '$BUF')"; exit 2 ;;
esac
BYTES=$((MB << 20)) PB=$(((MB << 20) / 8)) # the big file, one of the 8
for b in granary bench/readers bench/gen_dataset bench/objparts bench/passthrough; do
	[ -x "$O/$b" ] || { say "checkpoint: '$O/$b' is missing: run 'make all' first"; exit 1; }
done

. "$ROOT/tests/lib/services.sh"
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-ckpt.XXXXXX")
TMP=$(realpath "$TMP") # granary's daemon names its mount point canonically
REG=$TMP/mounts        # "kind mountpoint pid" of every mount, for cleanup
RES=$TMP/res
mkdir -p "$RES" "$OUT" "$TMP/bin"
: >"$REG"
# private copies, so that a rebuild during the run changes nothing
cp "$O/granary" "$O/bench/readers" "$O/bench/gen_dataset" "$O/bench/objparts" "$O/bench/passthrough" "$TMP/bin/"
G=$TMP/bin/granary RD=$TMP/bin/readers OP=$TMP/bin/objparts PT=$TMP/bin/passthrough
DD=(timeout -k 10 "$STEP_TIMEOUT" dd status=none bs=4M)

# ------------------------------------------------------------------------
# cleanup: every mount in the registry, then the services, by PID
# (the same steps as epoch.sh)

mounted() { awk -v mp="$1" '$2 == mp { f = 1 } END { exit !f }' /proc/self/mounts; }
unmount_all() {
	local kind mp pid
	while read -r kind mp pid; do
		if mounted "$mp"; then
			if [ "$kind" = granary ]; then
				timeout 300 "$G" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp" 2>/dev/null
			else
				fusermount3 -u "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null
			fi
		fi
		[ -n "$pid" ] || continue
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || continue 2; sleep 0.1; done
		kill "$pid" 2>/dev/null
		sleep 1
		kill -9 "$pid" 2>/dev/null
	done <"$REG"
	: >"$REG"
}
cleanup() {
	trap - EXIT INT TERM
	unmount_all
	svc_stop_all
	if [ "${BENCH_KEEP:-0}" = 1 ] || findmnt -rn -o TARGET | grep -qF "$TMP/"; then
		say "kept $TMP"
	else
		rm -rf "$TMP"
	fi
}
TPID="" # the running target (a subshell): stopped at once on a signal
kill_tree() {
	local c
	kill -STOP "$1" 2>/dev/null || return 0
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$c"; done
	kill -TERM "$1" 2>/dev/null
	kill -CONT "$1" 2>/dev/null
}
trap cleanup EXIT
trap '[ -n "$TPID" ] && kill_tree "$TPID"; exit 130' INT TERM

# ------------------------------------------------------------------------
# measuring helpers

why() { echo "$*" >"$TMP/why"; return 1; }
# no dirty pages left by what ran before (their writeback would compete)
settle() { timeout 120 sync; }
drop() {
	settle
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null ||
		echo "the page cache could not be dropped (not root?): saves and cold and warm reads may start with data cached" >"$TMP/note-drop"
}
# Every save starts from the same memory: the page cache dropped, then the
# source read into it. Without the drop a save ran with the objects of the
# save before it still cached, and on this machine (whose free memory goes
# back to the host) s3rver's node then spent up to a third more CPU on the
# same PUTs: the 8-file save, always second in its round, lost 5-10%
before_save() { drop; cat "$SRC" >/dev/null; }

# The cache flushes of BENCH_DIR's disk so far (field 16 of its stat in
# /sys, Linux 5.5 and later), or nothing: what a save makes the disk
# flush (each fsync that commits ext4's journal is one or two)
FLUSHSTAT=""
flushes() { [ -z "$FLUSHSTAT" ] || awk 'NF >= 17 { print $16 }' "$FLUSHSTAT"; }

# timed ID KEY MIB CMD...: run CMD, record MIB / its seconds as KEY, and
# the disk's flushes meanwhile as flushes_KEY
timed() {
	local id=$1 key=$2 mib=$3 t0 t1 f0
	shift 3
	f0=$(flushes)
	t0=$(now)
	"$@" || { [ -s "$TMP/why" ] || why "failed: $*"; return 1; }
	t1=$(now)
	put "$id" "$key" "$(awk -v a="$t0" -v b="$t1" -v m="$mib" 'BEGIN { printf "%.1f", m / (b - a) }')"
	[ -z "$f0" ] || put "$id" "flushes_$key" $(($(flushes) - f0))
}

# wait_object FILE SIZE: s3rver's file of an object reaches its full size
# (for clients that upload after close: the save ends when the store has it)
wait_object() {
	local end=$(($(date +%s) + STEP_TIMEOUT))
	until [ "$(stat -c %s "$1._S3rver_object" 2>/dev/null || echo 0)" = "$2" ]; do
		[ "$(date +%s)" -lt "$end" ] || { why "'$(basename "$1")' not in the store after ${STEP_TIMEOUT}s"; return 1; }
		sleep 0.1
	done
}

# the workload on a directory; OBJDIR set: wait for the objects there too
OBJDIR="" GSTORE=""
save1() {
	"${DD[@]}" if="$SRC" of="$1/ckpt.pt" conv=fsync || return 1
	[ -z "$OBJDIR" ] || wait_object "$OBJDIR/ckpt.pt" "$BYTES"
}
save8() {
	local i p rc=0 pids=""
	for i in 0 1 2 3 4 5 6 7; do
		"${DD[@]}" if="$SRC" of="$1/shard-$i.pt" iflag=skip_bytes,count_bytes \
			skip=$((i * PB)) count=$PB conv=fsync &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	[ $rc = 0 ] || return 1
	[ -z "$OBJDIR" ] || for i in 0 1 2 3 4 5 6 7; do wait_object "$OBJDIR/shard-$i.pt" "$PB" || return 1; done
}
read1() { "${DD[@]}" if="$1/ckpt.pt" of=/dev/null; }
read8() {
	local i p rc=0 pids=""
	for i in 0 1 2 3 4 5 6 7; do
		"${DD[@]}" if="$1/shard-$i.pt" of=/dev/null &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	return $rc
}
verify1() { cmp -s "$SRC" "$1/ckpt.pt" || why "DATA MISMATCH in ckpt.pt"; }
verify8() {
	local i
	for i in 0 1 2 3 4 5 6 7; do
		cmp -s -n "$PB" -i "$((i * PB)):0" "$SRC" "$1/shard-$i.pt" || why "DATA MISMATCH in shard-$i.pt"
	done
}

# saves ID DIR [PID]: both saves, source in the page cache, SAVES rounds
# (the files deleted between them), the median of each kept; with PID (the
# granary daemon), its peak RSS during each, the peak reset before, the
# highest of the rounds kept. Granary's single-file saves are paired as its
# reads are (see reads): with PAIR_LOCAL=1 a save of the same bytes to the
# local disk runs just before each, with PAIR_RAW a raw parallel PUT of
# them to that store; each 8-file save the same, with 8 dd's to the local
# disk (pslocal8) and the raw PUT (psraw8). The target of 8 writers over
# 1 takes the median of the rounds' ratios
hwm() { awk '/^VmHWM:/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
hwm_reset() { echo 5 >"/proc/$1/clear_refs" 2>/dev/null || echo "VmHWM could not be reset: the peak RSS covers the mount's life" >"$TMP/note-hwm"; }
paired_saves() { # ID R N: before granary's save of N (1 or 8) files
	local s=""
	[ "$3" = 1 ] || s=8
	if [ "$PAIR_LOCAL" = 1 ]; then
		mkdir -p "$TMP/pair-save"
		before_save
		if [ "$3" = 1 ]; then
			timed "$1" "pslocal_r$2" "$MB" "${DD[@]}" if="$SRC" of="$TMP/pair-save/ckpt.pt" conv=fsync
		else
			OBJDIR="" timed "$1" "pslocal8_r$2" "$MB" save8 "$TMP/pair-save"
		fi
		rm -rf "$TMP/pair-save"
	fi
	[ -z "$PAIR_RAW" ] || raw_put "$1" "psraw${s}_r$2" "$PAIR_RAW"
}
saves() {
	local r p1=0 p8=0 v
	for r in $(seq 1 "$SAVES"); do
		[ "$r" = 1 ] || unsave "$2" || return 1
		paired_saves "$1" "$r" 1
		before_save
		[ -z "${3:-}" ] || hwm_reset "$3"
		timed "$1" "save1_r$r" "$MB" save1 "$2" || return 1
		[ -z "${3:-}" ] || { v=$(hwm "$3"); [ "$v" -le "$p1" ] || p1=$v; }
		paired_saves "$1" "$r" 8
		before_save
		[ -z "${3:-}" ] || hwm_reset "$3"
		timed "$1" "save8_r$r" "$MB" save8 "$2" || return 1
		[ -z "${3:-}" ] || { v=$(hwm "$3"); [ "$v" -le "$p8" ] || p8=$v; }
	done
	median "$1" save1 "$SAVES"
	median "$1" save8 "$SAVES"
	[ -z "${3:-}" ] || { put "$1" hwm1 "$p1"; put "$1" hwm8 "$p8"; }
}

# unsave DIR: delete the saved files before the next round (an overwrite
# would find s3rver's objects already whole). OBJDIR set (s3fs, rclone):
# wait until the store has dropped them too; GSTORE set (granary: where
# its store keeps its files): until granary has deleted every block in
# the background, so that its deletes do not run during the next save
unsave() {
	local f end=$(($(date +%s) + STEP_TIMEOUT))
	rm -f "$1/ckpt.pt" "$1"/shard-?.pt || { why "cannot delete the saved files in $1"; return 1; }
	if [ -n "$GSTORE" ]; then
		while [ -n "$(find "$GSTORE/blocks" -type f -print -quit 2>/dev/null)" ]; do
			[ "$(date +%s)" -lt "$end" ] || { why "granary's blocks still in the store ${STEP_TIMEOUT}s after the delete"; return 1; }
			sleep 0.2
		done
	fi
	[ -n "$OBJDIR" ] || return 0
	for f in ckpt.pt shard-0.pt shard-1.pt shard-2.pt shard-3.pt shard-4.pt shard-5.pt shard-6.pt shard-7.pt; do
		while [ -e "$OBJDIR/$f._S3rver_object" ]; do
			[ "$(date +%s)" -lt "$end" ] || { why "'$f' still in the store ${STEP_TIMEOUT}s after its delete"; return 1; }
			sleep 0.1
		done
	done
}

# reads ID MOUNT_FN MP: cold and warm read of the big file on one fresh
# mount, the cold read of the 8 on another; READS rounds, the median of
# each kept (reads on this machine swing by a quarter between runs). The
# bytes are compared in the first round; VERIFY8=0 skips the 8 files'.
# Granary's reads are paired: each warm read with a read of the source
# file on the local disk just before it, and, PAIR_RAW set (the raw
# store's URL, whose objects t_raw left), each cold read with a raw
# parallel GET of the same bytes just before it, so that a round's ratio
# compares two reads a few seconds apart (this machine's disk and memory
# speeds drift over minutes; the baselines' own rows ran long before)
PAIR_RAW="" PAIR_LOCAL=0
paired_get() { # ID KEY
	local l
	[ -n "$PAIR_RAW" ] || return 0
	drop
	l=$("$OP" -t "$T" -g "$SRC" "$PAIR_RAW" ckpt) || why "objparts get failed: $l"
	put "$1" "$2" "$(field "$l" mib_per_s)"
}
reads() {
	local r g0
	for r in $(seq 1 "$READS"); do
		"$2" "$3"
		paired_get "$1" "praw1_r$r"
		drop
		timed "$1" "cold1_r$r" "$MB" read1 "$3"
		if [ "$PAIR_LOCAL" = 1 ]; then
			drop
			timed "$1" "plocal_r$r" "$MB" "${DD[@]}" if="$SRC" of=/dev/null
		fi
		# granary: what its warm read still fetched from the store, and
		# what the cold read left out of the disk cache
		[ "$2" != gmount ] || g0=$(gstat "$3" store get_bytes)
		drop
		timed "$1" "warm1_r$r" "$MB" read1 "$3"
		if [ "$2" = gmount ] && [ "$GCACHE" = 1 ]; then
			put "$1" "warm_store_mib_r$r" $((($(gstat "$3" store get_bytes) - g0) >> 20))
			put "$1" "fill_skips_r$r" "$(gstat "$3" disk_cache fill_skips)"
		fi
		[ "$r" != 1 ] || verify1 "$3"
		unmount_all
		"$2" "$3"
		paired_get "$1" "praw8_r$r"
		drop
		timed "$1" "cold8_r$r" "$MB" read8 "$3"
		[ "$r" != 1 ] || [ "${VERIFY8:-1}" = 0 ] || verify8 "$3"
		unmount_all
	done
	median "$1" cold1 "$READS"
	median "$1" warm1 "$READS"
	median "$1" cold8 "$READS"
}

# ------------------------------------------------------------------------
# targets: each runs in a subshell with set -e; results in $RES/ID, the
# reason for an n/a in $TMP/why

t_local() {
	local d=$TMP/local
	mkdir -p "$d"
	saves "$1" "$d"
	reads "$1" true "$d"
	rm -rf "$d"
}

# raw_put ID KEY URL: a raw parallel PUT of the source as new objects, as
# granary's saves make (a PUT that replaces objects runs faster on this
# machine, see README.md), timed as KEY; they are deleted again
raw_put() {
	local l
	before_save
	l=$("$OP" -t "$T" "$SRC" "$3" put) || why "objparts put failed: $l"
	put "$1" "$2" "$(field "$l" mib_per_s)"
	case $3 in
	file://*) rm -rf "${3#file://}/put" ;;
	*) free_bucket "${3##*/}/put" ;;
	esac
}
t_raw() { # ID URL
	local l r
	for r in $(seq 1 "$SAVES"); do raw_put "$1" "save1_r$r" "$2"; done
	median "$1" save1 "$SAVES"
	[ "$READS" -gt 0 ] || return 0
	# the objects that the GETs read (and granary's reads pair with)
	l=$("$OP" -t "$T" "$SRC" "$2" ckpt) || why "objparts put failed: $l"
	for r in $(seq 1 "$READS"); do
		drop
		l=$("$OP" -t "$T" -g "$SRC" "$2" ckpt) || why "objparts get failed: $l"
		put "$1" "cold1_r$r" "$(field "$l" mib_per_s)"
	done
	median "$1" cold1 "$READS"
}
# the raw objects stay until granary's target on the same backend is
# done: its reads pair with GETs of them (reads)
t_raw_file() { mkdir -p "$TMP/raw-file"; t_raw "$1" "file://$TMP/raw-file"; }
t_raw_s3() { t_raw "$1" "$GRANARY_TEST_S3/raw"; }
# FUSE's own cost, the reference for granary's reads: bench/passthrough
# (granary's FUSE capabilities, timeouts and thread pool; replies by
# splice) over a local copy of the files, read as granary's are, paired
# with the raw file:// store's GETs when that target ran
ptmount() { peer_mount passthrough "$1" "$PT" -f "$TMP/pt" "$1"; }
t_passthrough() {
	[ "$READS" -gt 0 ] || why "reads only, and BENCH_CKPT_READS=0"
	mkdir -p "$TMP/pt"
	save1 "$TMP/pt"
	save8 "$TMP/pt"
	PAIR_LOCAL=1 PAIR_RAW=""
	ok raw-file && PAIR_RAW=file://$TMP/raw-file
	reads "$1" ptmount "$TMP/mnt-pt"
	rm -rf "$TMP/pt"
}
free_bucket() { find "$TMP/s3/data/$1" -type f -name '*._S3rver_*' -delete; }

# a fresh granary mount: empty private disk cache, --buffer-size $BUF;
# GCACHE=0: no --cache-dir, the mount's default (granary does not cache a
# file:// store on the disk of its default cache directory)
GMETA="" GCACHE=1
gmount() { # MP
	local cache=()
	rm -rf "$TMP/gcache"
	mkdir -p "$1" "$TMP/gcache"
	[ "$GCACHE" = 1 ] && cache=(--cache-dir "$TMP/gcache")
	"$G" mount "$GMETA" "$1" --log "$TMP/$(basename "$1").log" "${cache[@]}" \
		--buffer-size "$BUF" </dev/null >/dev/null || why "granary mount failed (see $(basename "$1").log)"
	echo "granary $1 $(daemon_pid "$1")" >>"$REG"
}
fs_dev() { # PATH: the file system of PATH or of its nearest existing parent
	local p=$1
	until [ -e "$p" ]; do p=$(dirname "$p"); done
	stat -c %d "$p"
}
daemon_pid() { # MP: the granary daemon serving MP (as tests/integ/lib.sh's mount_pids)
	local p
	for p in /proc/[0-9]*; do
		{ tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -qxF -- "$1" || continue
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "granary mount" || continue
		echo "${p#/proc/}"
		return
	done
}
snap_ms() { # SRC DST -> the ms granary snapshot reports
	local l
	l=$("$G" snapshot "$1" "$2" 2>&1) || { why "granary snapshot failed: $l"; return 1; }
	printf '%s\n' "$l" | sed -n 's/.* in \([0-9.]*\) ms$/\1/p'
}
t_granary() { # ID DB STORAGE_URL RAW_ID RAW_URL
	local mp=$TMP/mnt-$1 pid l ms
	GMETA="$GRANARY_TEST_REDIS?db=$2"
	# no trash: a deleted save frees its blocks at once (unsave waits)
	"$G" format "$GMETA" "ckpt-$1" --storage "$3" --trash-days 0 >/dev/null
	gmount "$mp"
	pid=$(daemon_pid "$mp")
	[ -n "$pid" ] || why "no granary daemon found for $mp"
	PAIR_LOCAL=1 PAIR_RAW=""
	ok "$4" && PAIR_RAW=$5
	saves "$1" "$mp" "$pid"
	ms=$(snap_ms "$mp/ckpt.pt" "$mp/ckpt-snap.pt")
	put "$1" snap1 "$ms"
	if [ "$NTREE" -gt 0 ] && [ ! -f "$TMP/tree.done" ]; then
		l=$(timeout "$STEP_TIMEOUT" "$RD" -t 4 -c "$TMP/tree-src" "$TMP/tree.txt" "$mp/tree") ||
			why "creating the tree failed"
		put "$1" tree_fps "$(field "$l" files_per_s)"
		ms=$(snap_ms "$mp/tree" "$mp/tree-snap")
		put "$1" snaptree "$ms"
		touch "$TMP/tree.done"
	fi
	unmount_all
	reads "$1" gmount "$mp"
}
# As a user would mount it: with no --cache-dir, when the store shares the
# disk of the default cache directory (else a private one, not to fill
# /var/cache/granary)
t_granary_file() {
	if [ "$(id -u)" = 0 ] && [ "$(fs_dev "$TMP")" = "$(fs_dev /var/cache/granary)" ]; then
		GCACHE=0
		echo "granary on file://: mounted with no --cache-dir; the store is on the disk of the default cache directory, so the mount has no disk cache and its warm read is from the store's files" >"$TMP/note-gfile"
	fi
	GSTORE=$TMP/granary-file t_granary "$1" 2 "file://$TMP/granary-file" raw-file "file://$TMP/raw-file"
	GCACHE=1
	rm -rf "$TMP/granary-file" "$TMP/raw-file"
}
t_granary_s3() {
	GSTORE=$TMP/s3/data/granary t_granary "$1" 1 "$GRANARY_TEST_S3/granary" raw-s3 "$GRANARY_TEST_S3/raw"
	free_bucket granary
	free_bucket raw
}

peer_mount() { # KIND MP CMD...: a FUSE client in the foreground, in the background
	local kind=$1 mp=$2
	shift 2
	mkdir -p "$mp"
	"$@" </dev/null >>"$TMP/$(basename "$mp").log" 2>&1 &
	echo "$kind $mp $!" >>"$REG"
	for _ in $(seq 1 100); do
		mountpoint -q "$mp" && return 0
		kill -0 $! 2>/dev/null || break
		sleep 0.1
	done
	why "$kind did not mount (see $(basename "$mp").log)"
}
s3fs_mount() {
	peer_mount s3fs "$1" s3fs s3fs "$1" -f -o passwd_file="$TMP/s3fs.passwd" \
		-o use_path_request_style -o url="http://127.0.0.1:$GRANARY_TEST_S3_PORT" -o endpoint=us-east-1
}
t_s3fs() {
	command -v s3fs >/dev/null || why "s3fs not installed (apt-get install -y s3fs)"
	echo S3RVER:S3RVER >"$TMP/s3fs.passwd"
	chmod 600 "$TMP/s3fs.passwd"
	s3fs_mount "$TMP/mnt-s3fs"
	OBJDIR=$TMP/s3/data/s3fs saves "$1" "$TMP/mnt-s3fs"
	unmount_all
	# no cache: verifying the 8 would read them from the store once more
	VERIFY8=0 reads "$1" s3fs_mount "$TMP/mnt-s3fs"
	free_bucket s3fs
}
# on a prefix, as in epoch.sh; its cache emptied at every mount
rclone_mount() {
	rm -rf "$TMP/rclone-cache"
	peer_mount rclone "$1" env -u AWS_CA_BUNDLE rclone --config "$TMP/rclone.conf" \
		mount rclone:rclone/ckpt "$1" --vfs-cache-mode full --vfs-write-back 0s \
		--cache-dir "$TMP/rclone-cache"
}
t_rclone() {
	command -v rclone >/dev/null || why "rclone not installed (apt-get install -y rclone)"
	printf '[rclone]\ntype = s3\nprovider = Other\nendpoint = http://127.0.0.1:%s\naccess_key_id = S3RVER\nsecret_access_key = S3RVER\n' \
		"$GRANARY_TEST_S3_PORT" >"$TMP/rclone.conf"
	rclone_mount "$TMP/mnt-rclone"
	OBJDIR=$TMP/s3/data/rclone/ckpt saves "$1" "$TMP/mnt-rclone"
	unmount_all
	reads "$1" rclone_mount "$TMP/mnt-rclone"
	free_bucket rclone
	rm -rf "$TMP/rclone-cache"
}

run_target() { # ID
	local id=$1 fn rc t0
	fn=t_$(echo "$id" | tr - _)
	declare -F "$fn" >/dev/null ||
		{ say "unknown target '$id' (known: local raw-file passthrough granary-file raw-s3 granary-s3 s3fs rclone)"; return; }
	say "== $id"
	rm -f "$TMP/why"
	: >>"$RES/$id"
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
	[ $rc = 0 ] || { put "$id" failed "$(head -1 "$TMP/why" 2>/dev/null || echo "exit $rc")"; say "   n/a: $(head -1 "$TMP/why")"; }
	put "$id" secs $(($(date +%s) - t0))
	say "   $(($(date +%s) - t0)) s"
}

# ------------------------------------------------------------------------
# setup and run

T_START=$(date +%s)
SRC=$TMP/src.pt
l=$(findmnt -no MAJ:MIN -T "$TMP" 2>/dev/null | head -1 | tr -d " ")
[ -n "$l" ] && [ "$(awk '{ print NF }' "/sys/dev/block/$l/stat" 2>/dev/null)" -ge 17 ] 2>/dev/null &&
	FLUSHSTAT=/sys/dev/block/$l/stat
say "checkpoint: $MB MiB of random bytes, 8 x $((MB / 8)) MiB; targets: $TARGETS"
head -c "$BYTES" /dev/urandom >"$SRC"
case " $TARGETS " in *" granary-"*)
	[ "$NTREE" -gt 0 ] && "$TMP/bin/gen_dataset" -n "$NTREE" -d 100 -m 4 "$TMP/tree-src" "$TMP/tree.txt" >/dev/null ;;
esac
svc_start_redis "$TMP/redis" >/dev/null || exit 1
svc_start_s3rver "$TMP/s3" granary raw s3fs rclone >/dev/null || exit 1
for t in $TARGETS; do run_target "$t"; done
RUNTIME=$(($(date +%s) - T_START))

# ------------------------------------------------------------------------
# report

name() {
	case $1 in
	local) echo "local disk" ;;
	raw-file) echo "raw store file:// (objstore PUT/GET)" ;;
	raw-s3) echo "raw store s3rver (objstore PUT/GET)" ;;
	passthrough) echo "FUSE passthrough over the local files" ;;
	granary-file) echo "granary on file://" ;;
	granary-s3) echo "granary on s3rver" ;;
	s3fs) echo "s3fs on s3rver" ;;
	rclone) echo "rclone mount on s3rver" ;;
	esac
}
rawof() { case $1 in *-file | passthrough) echo raw-file ;; local) ;; *) echo raw-s3 ;; esac; }
cell() { local v; v=$(get "$1" "$2"); echo "${v:-—}"; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
# check A FACTOR B: "met" when A >= FACTOR * B
check() {
	if [ -z "$1" ] || [ -z "$3" ]; then echo "n/a (not measured)"; return; fi
	awk -v a="$1" -v f="$2" -v b="$3" 'BEGIN { r = a / b; printf "%s (%.2fx)", (r >= f ? "met" : "**NOT met**"), r }'
}
nrounds() { case $1 in save*) echo "$SAVES" ;; *) echo "$READS" ;; esac; } # KEY
# pratio ID KEY BASE: the median over the rounds of KEY_rR / BASE_rR
pratio() {
	local r a b v=""
	for r in $(seq 1 "$(nrounds "$2")"); do
		a=$(get "$1" "$2_r$r") b=$(get "$1" "$3_r$r")
		[ -n "$a" ] && [ -n "$b" ] && v="$v $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", a / b }')"
	done
	# shellcheck disable=SC2086 # the ratios, one word each
	[ -z "${v// /}" ] || mid $v
}
# fl_rounds ID KEY BASE: the flushes of every round, "a / b"
fl_rounds() {
	local r out=""
	for r in $(seq 1 "$SAVES"); do out="$out${out:+, }$(cell "$1" "flushes_$2_r$r") / $(cell "$1" "flushes_$3_r$r")"; done
	echo "$out"
}
# rounds ID KEY BASE: "a/b" of every round
rounds() {
	local r out=""
	for r in $(seq 1 "$(nrounds "$2")"); do out="$out${out:+, }$(cell "$1" "$2_r$r") / $(cell "$1" "$3_r$r")"; done
	echo "$out"
}
# pcheck ID KEY BASE FACTOR A B: the verdict on the paired ratio of the
# rounds, and the ratio of the medians A / B beside it; no pairs: check
pcheck() {
	local p
	p=$(pratio "$1" "$2" "$3")
	[ -n "$p" ] || { check "$5" "$4" "$6"; return; }
	awk -v p="$p" -v f="$4" -v a="$5" -v b="$6" 'BEGIN {
		printf "%s (%.2fx paired", (p >= f ? "met" : "**NOT met**"), p
		if (a != "" && b != "") printf "; %.2fx of the medians", a / b
		printf ")" }'
}
below() { # VALUE LIMIT UNIT
	if [ -z "$1" ]; then echo "n/a (not measured)"; return; fi
	awk -v v="$1" -v l="$2" -v u="$3" 'BEGIN { printf "%s (%s %s, limit %s %s)", (v <= l ? "met" : "**NOT met**"), v, u, l, u }'
}
: >"$TMP/foot"
footnote() { echo "$1" >>"$TMP/foot"; echo "[$(wc -l <"$TMP/foot")]"; }

report() {
	local id na vl vr raw l r v
	echo "# granary checkpoint benchmark, $STAMP"
	echo
	echo "One file of $MB MiB of random bytes, and 8 files of $((MB / 8)) MiB written at once by 8 processes" \
		"(\`dd bs=4M conv=fsync\`, the source in the page cache); $(nproc) cores, Linux $(uname -r);" \
		"$("$G" --version 2>/dev/null); granary mounted with \`--buffer-size $BUF\`; run took ${RUNTIME} s."
	echo
	echo "| target | save 1 file MiB/s | save 8 files MiB/s | cold read MiB/s | cold read 8 MiB/s | warm read MiB/s | vs local | vs raw |"
	echo "|---|---|---|---|---|---|---|---|"
	for id in $TARGETS; do
		[ -f "$RES/$id" ] || continue
		na=$(get "$id" failed)
		if [ -n "$na" ]; then
			echo "| $(name "$id") $(footnote "$(name "$id"): n/a: $na") | n/a | n/a | n/a | n/a | n/a | — | — |"
			continue
		fi
		vl="—" vr="—"
		if [ "$id" != local ] && ok local; then
			vl=""
			[ -z "$(get "$id" save1)" ] || vl="save $(ratio "$(get "$id" save1)" "$(get local save1)")"
			[ -z "$(get "$id" warm1)" ] || vl="$vl${vl:+, }warm $(ratio "$(get "$id" warm1)" "$(get local warm1)")"
		fi
		raw=$(rawof "$id")
		if [ -n "$raw" ] && [ "$raw" != "$id" ] && ok "$raw"; then
			vr=""
			[ -z "$(get "$id" save1)" ] || vr="save $(ratio "$(get "$id" save1)" "$(get "$raw" save1)")"
			[ -z "$(get "$id" cold1)" ] || vr="$vr${vr:+, }cold $(ratio "$(get "$id" cold1)" "$(get "$raw" cold1)")"
		fi
		echo "| $(name "$id") | $(cell "$id" save1) | $(cell "$id" save8) | $(cell "$id" cold1) | $(cell "$id" cold8) | $(cell "$id" warm1) | $vl | $vr |"
	done
	echo
	echo "Granary client peak RSS (VmHWM of the daemon, reset before each save), \`--buffer-size $BUF\`:"
	for id in granary-file granary-s3; do
		ok "$id" && [ -n "$(get "$id" hwm8)" ] &&
			echo "$(name "$id"): $(get "$id" hwm8) MiB during the 8-file save ($(get "$id" hwm1) MiB during the single-file save)."
	done
	echo
	echo "Snapshots (\`granary snapshot\`, the time it reports):"
	for id in granary-file granary-s3; do
		ok "$id" || continue
		echo "$(name "$id"): the $MB MiB file in $(get "$id" snap1) ms."
		[ -n "$(get "$id" snaptree)" ] &&
			echo "$(name "$id"): a tree of $NTREE files (100 directories, mean 4 KiB, created through the mount at $(get "$id" tree_fps) files/s) in $(get "$id" snaptree) ms."
	done
	if [ -n "$FLUSHSTAT" ] && [ -n "$(get granary-file flushes_save1_r1)" ]; then
		echo
		echo "Cache flushes of the disk under \`BENCH_DIR\` (\`$FLUSHSTAT\`, the whole machine's) during each save, round by round; granary on file:// / the local disk's \`dd\` just before it:"
		echo
		echo "- 1 file: $(fl_rounds granary-file save1 pslocal)"
		echo "- 8 files: $(fl_rounds granary-file save8 pslocal8)"
	fi
	echo
	echo "Targets of the issue:"
	echo
	echo "| target | result |"
	echo "|---|---|"
	echo "| save to file:// ≥ 0.9x local disk, same disk (1 file, fsync) | $(pcheck granary-file save1 pslocal 0.9 "$(get granary-file save1)" "$(get local save1)") |"
	echo "| save to file:// ≥ 0.9x local disk, same disk (8 files at once, fsync) | $(pcheck granary-file save8 pslocal8 0.9 "$(get granary-file save8)" "$(get local save8)") |"
	echo "| save to s3rver ≥ 0.9x raw parallel PUT (1 file) | $(pcheck granary-s3 save1 psraw 0.9 "$(get granary-s3 save1)" "$(get raw-s3 save1)") |"
	echo "| save to s3rver ≥ 0.9x raw parallel PUT (8 files at once) | $(pcheck granary-s3 save8 psraw8 0.9 "$(get granary-s3 save8)" "$(get raw-s3 save1)") |"
	echo "| save to s3rver ≥ 3x rclone (1 file) | $(check "$(get granary-s3 save1)" 3 "$(get rclone save1)") |"
	echo "| save to s3rver ≥ 3x s3fs (1 file) | $(check "$(get granary-s3 save1)" 3 "$(get s3fs save1)") |"
	for id in granary-file granary-s3; do
		raw=$(rawof "$id")
		echo "| $(name "$id"): cold read ≥ 0.8x raw parallel GET (1 file / 8 files) |" \
			"$(pcheck "$id" cold1 praw1 0.8 "$(get "$id" cold1)" "$(get "$raw" cold1)") /" \
			"$(pcheck "$id" cold8 praw8 0.8 "$(get "$id" cold8)" "$(get "$raw" cold1)") |"
		echo "| $(name "$id"): warm read ≥ 0.8x local disk | $(pcheck "$id" warm1 plocal 0.8 "$(get "$id" warm1)" "$(get local warm1)") |"
		echo "| $(name "$id"): 8 writers ≥ 1 writer | $(pcheck "$id" save8 save1 1 "$(get "$id" save8)" "$(get "$id" save1)") |"
		echo "| $(name "$id"): peak RSS ≤ buffer-size + 100 MiB (8-file save) | $(below "$(get "$id" hwm8)" $((BUF_MIB + 100)) MiB) |"
		echo "| $(name "$id"): snapshot of the $MB MiB file < 50 ms | $(below "$(get "$id" snap1)" 50 ms) |"
		[ -n "$(get "$id" snaptree)" ] &&
			echo "| $(name "$id"): snapshot of $NTREE files < $((5000 * NTREE / 100000)) ms (100,000 < 5 s, scaled) | $(below "$(get "$id" snaptree)" $((5000 * NTREE / 100000)) ms) |"
	done
	echo
	if [ -n "$(get granary-file pslocal_r1)$(get granary-s3 pslocal_r1)" ]; then
		echo "Paired saves, MiB/s of each round, granary / the baseline save just before it (the last column: the 8-file save / the 1-file save of its round):"
		echo
		echo "| target | 1 file / local disk | 1 file / raw PUT | 8 files / local disk 8 files | 8 files / raw PUT | 8 files / 1 file |"
		echo "|---|---|---|---|---|---|"
		for id in granary-file granary-s3; do
			ok "$id" && [ -n "$(get "$id" pslocal_r1)" ] || continue
			v="—" v8="—"
			[ -z "$(get "$id" psraw_r1)" ] || v=$(rounds "$id" save1 psraw)
			[ -z "$(get "$id" psraw8_r1)" ] || v8=$(rounds "$id" save8 psraw8)
			echo "| $(name "$id") | $(rounds "$id" save1 pslocal) | $v | $(rounds "$id" save8 pslocal8) | $v8 | $(rounds "$id" save8 save1) |"
		done
		echo
	fi
	if [ -n "$(get granary-file plocal_r1)$(get granary-s3 plocal_r1)" ]; then
		echo "Paired reads, MiB/s of each round, granary (or the passthrough) / the baseline read just before it; the last column the median of the rounds' ratios:"
		echo
		echo "| target | cold read / raw GET | cold read 8 / raw GET | warm read / local disk | paired ratios: cold, cold 8, warm |"
		echo "|---|---|---|---|---|"
		for id in passthrough granary-file granary-s3; do
			ok "$id" && [ -n "$(get "$id" plocal_r1)" ] || continue
			v=""
			for l in "cold1 praw1" "cold8 praw8" "warm1 plocal"; do
				# shellcheck disable=SC2086 # KEY BASE, two words
				r=$(pratio "$id" $l)
				v="$v${v:+, }${r:+$(printf '%.2fx' "$r")}"
			done
			echo "| $(name "$id") | $(rounds "$id" cold1 praw1) | $(rounds "$id" cold8 praw8) | $(rounds "$id" warm1 plocal) | $v |"
		done
		echo
		footnote "paired: in every round of granary's reads, a raw parallel GET of the same bytes (objparts, page cache dropped) runs just before each cold read, and a read of the source file on the local disk just before the warm read; each save of granary (1 file, and 8 files at once) follows the same save of the same bytes to the local disk (the same disk as the file:// store) and a raw parallel PUT of them. The targets of the reads and of the saves take the median of the rounds' ratios (the ratio of the medians, the baselines' rows having run minutes earlier, beside it)" >/dev/null
	fi
	ok passthrough && footnote "FUSE passthrough: bench/passthrough (granary's FUSE capabilities, timeouts and thread pool; its replies splice the local files) over a copy of the files on the local disk, read the way granary's are: what a read through FUSE costs on this host with no work in the daemon. No saves (it is read-only)" >/dev/null
	footnote "local disk: the warm read is a second read after dropping the page cache (the disk has no other cache)" >/dev/null
	footnote "saves: every save figure (the raw stores' PUTs too) is the median of $SAVES rounds (BENCH_CKPT_SAVES), the files deleted between rounds, each save starting with the page cache dropped and the source read into it; peak RSS is the highest of the rounds" >/dev/null
	ok raw-s3 || ok raw-file && footnote "raw stores: $MB MiB put (got) as 4 MiB objects by $T threads with libgranary's objstore (build/bench/objparts); no file system, no cache: no 8-file or warm run" >/dev/null
	ok s3fs || ok rclone && footnote "s3fs and rclone: the saves end when every object is whole in s3rver's store (rclone uploads after close); s3fs has no cache, its warm read goes to the store again; the 8 files are not compared with the source on s3fs (it would read them once more)" >/dev/null
	footnote "cold: a fresh mount, empty client caches (granary: a private --cache-dir, emptied; rclone: its --cache-dir emptied), page cache dropped; warm: a second read on that mount after dropping the page cache; cold read 8: the 8 files read at once by 8 processes on another fresh mount. Every read figure (the raw stores' GETs too) is the median of $READS rounds (BENCH_CKPT_READS), each on fresh mounts. The big file is compared with the source after the first warm read, the 8 files after their first read." >/dev/null
	for id in granary-file granary-s3; do
		ok "$id" || continue
		l=""
		for r in $(seq 1 "$READS"); do
			v=$(get "$id" "warm_store_mib_r$r")
			[ -n "$v" ] && [ "$v" != 0 ] || continue
			l="$l${l:+, }round $r: $v MiB ($(get "$id" "fill_skips_r$r") blocks not cached)"
		done
		[ -z "$l" ] || footnote "$(name "$id"): the warm read was not all from the disk cache; fetched from the store: $l. A cache disk with less free space than --free-space-ratio (default 10%) caches nothing" >/dev/null
	done
	for l in "$TMP"/note-*; do [ -f "$l" ] && footnote "$(cat "$l")" >/dev/null; done
	awk '{ print NR ". " $0 }' "$TMP/foot"
}

REPORT=$OUT/checkpoint-$STAMP.md
report >"$REPORT"
cat "$REPORT"
say "report: $REPORT (run took ${RUNTIME} s)"
