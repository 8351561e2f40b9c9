#!/bin/bash
# t0166-volume-life.sh - a volume's life, then its checks. Two clients (one
# with --writeback) run the random exerciser against shadow copies, churn
# names (creates, overwrites, appends, renames, unlinks) and take
# snapshots and a version; each client is killed in the middle of a big
# write as it is about to commit it (its blocks put, or staged); Redis is
# restarted under both. Afterwards every file reads back byte-exact,
# fsck --objects is clean, gc reports exactly the objects the two kills
# leaked, and after gc --delete --min-age 0 the store holds exactly what
# the metadata references (gc's live objects, fsck's referenced objects
# and the objects in the store are the same number, with the slices
# compactions replaced, which wait an hour for readers).
. "$(dirname "$0")/lib.sh"

[ -x "$FSRAND" ] || fail "no fsrand at '$FSRAND' (make all)"

# our own Redis with an fsync'd AOF, so that it can be restarted
SVC_REDIS_PERSIST=1 svc_start_redis "$TMP/own-redis" || fail "cannot start redis"
REDIS_PID=$GRANARY_TEST_REDIS_PID
restart_redis() {
	kill "$REDIS_PID"
	wait "$REDIS_PID" 2>/dev/null || true
	SVC_REDIS_PERSIST=1 svc_start_redis "$TMP/own-redis" || fail "cannot restart redis"
	REDIS_PID=$GRANARY_TEST_REDIS_PID
}
META="unix://$TMP/own-redis/redis.sock?db=1"
case $GRANARY_STORAGE in
file)
	DATA_DIRS="$TMP/data-a $TMP/data-b"
	mkdir -p $DATA_DIRS
	STORAGE="file://$TMP/data-a:$TMP/data-b"
	;;
s3)
	need_s3
	DATA_DIRS="${GRANARY_TEST_S3_DATA:-}/granary-test/life-$$"
	STORAGE="$GRANARY_TEST_S3/granary-test/life-$$"
	;;
esac
"$GRANARY" format "$META" life --storage "$STORAGE" >/dev/null || fail "format failed"
A=$TMP/a B=$TMP/b
OPTS="--attr-timeout 0.2 --entry-timeout 0.2"
mount_vol "$META" "$A" $OPTS
mount_vol "$META" "$B" $OPTS --writeback

# --- random data and names on both clients at once, against shadows
seed=${GRANARY_SEED:-$(date +%s)}
mkdir -p "$A/ra" "$TMP/sa" "$B/rb" "$TMP/sb"
"$FSRAND" -s "$seed" -n 1500 -f 4 -m 12M "$A/ra" "$TMP/sa" >"$TMP/fsrand-a.out" 2>&1 &
fa=$!
"$FSRAND" -s $((seed + 1)) -n 1500 -f 4 -m 12M "$B/rb" "$TMP/sb" >"$TMP/fsrand-b.out" 2>&1 &
fb=$!
mkdir -p "$A/ns" "$TMP/ns" "$TMP/src"
for i in $(seq 1 8); do random_file "$TMP/src/s$i" $((i * 70001)); done
RANDOM=$seed
for i in $(seq 1 300); do
	f=f$((RANDOM % 40))
	case $((RANDOM % 6)) in
	0 | 1) # create or overwrite
		s=$TMP/src/s$((RANDOM % 8 + 1))
		cp "$s" "$A/ns/$f" && cp "$s" "$TMP/ns/$f" ;;
	2) # append a line
		echo "line $i" >>"$A/ns/$f" && echo "line $i" >>"$TMP/ns/$f" ;;
	3) # rename over whatever is there
		g=f$((RANDOM % 40))
		[ -e "$TMP/ns/$f" ] && [ "$f" != "$g" ] &&
			mv "$A/ns/$f" "$A/ns/$g" && mv "$TMP/ns/$f" "$TMP/ns/$g" ;;
	4) # unlink
		[ -e "$TMP/ns/$f" ] && rm "$A/ns/$f" && rm "$TMP/ns/$f" ;;
	5) # truncate
		[ -e "$TMP/ns/$f" ] && n=$((RANDOM * 7)) &&
			truncate -s "$n" "$A/ns/$f" && truncate -s "$n" "$TMP/ns/$f" ;;
	esac
	if [ "$i" = 100 ]; then
		"$GRANARY" snapshot "$A/ns" "$A/snap100" >/dev/null ||
			fail "snapshot failed"
		cp -a "$TMP/ns" "$TMP/snap100"
	fi
	if [ "$i" = 200 ]; then
		"$GRANARY" version create "$A/ns" v200 >/dev/null || fail "version create failed"
		cp -a "$TMP/ns" "$TMP/v200"
	fi
done
wait $fa || fail "fsrand on A found a difference: $(tail -5 "$TMP/fsrand-a.out") (seed $seed)"
wait $fb || fail "fsrand on B found a difference: $(tail -5 "$TMP/fsrand-b.out") (seed $((seed + 1)))"
diff -r "$TMP/ns" "$A/ns" || fail "the names churned on A differ"
diff -r "$TMP/ns" "$B/ns" || fail "the names churned on A read differently on B"
ok "two clients: random data against shadows, 300 name changes, a snapshot and a version"

# --- each client killed as it is about to commit a big write
# kill_at_commit MP ARGS: MP (unmounted) mounted by the test build that
# kills itself at its next commit of a big file's data; a 32 MiB write
# with conv=fsync dies with it at its fsync, its 8 blocks (4 MiB each)
# put, or staged (--writeback, uploaded by the next mount); MP mounted
# again (ARGS), which finds the file empty
kill_at_commit() {
	local mp=$1 pids; shift
	GRANARY=$GRANARY_HOOKS GRANARY_TEST_KILL_BEFORE_COMMIT=1 mount_vol "$META" "$mp" $OPTS "$@"
	pids=$(mount_pids "$mp")
	dd if=/dev/urandom of="$mp/killed" bs=1M count=32 conv=fsync status=none 2>/dev/null &&
		fail "a write whose client died at its commit succeeded"
	for p in $pids; do
		wait_until 30 eval "! kill -0 $p 2>/dev/null" || fail "the client did not die at its commit"
	done
	fusermount3 -uz "$mp" 2>/dev/null
	MOUNTS=${MOUNTS/ $mp/}
	mount_vol "$META" "$mp" $OPTS "$@"
	check_eq "$(stat -c %s "$mp/killed")" 0 "size of the killed write's file on $mp"
}
umount_vol "$A"
umount_vol "$B"
kill_at_commit "$A"
kill_at_commit "$B" --writeback
LEAK=16 # 8 blocks each
ok "each client killed as it was about to commit a 32 MiB write: the files are empty"

# --- Redis restarted under both clients, which go on
restart_redis
wait_until 30 stat "$A/ns" || fail "A does not recover from the Redis restart"
cp "$TMP/src/s3" "$A/ns/after-restart" && cp "$TMP/src/s3" "$TMP/ns/after-restart" ||
	fail "A cannot write after the Redis restart"
wait_until 30 cmp -s "$TMP/src/s3" "$B/ns/after-restart" ||
	fail "B does not read what A wrote after the Redis restart"
ok "Redis restarted under both clients: they go on"

# --- everything reads back, byte for byte
check_all() { # MP
	diff -r "$TMP/sa" "$1/ra" >/dev/null || fail "$1: the exerciser's files of A differ"
	diff -r "$TMP/sb" "$1/rb" >/dev/null || fail "$1: the exerciser's files of B differ"
	diff -r "$TMP/ns" "$1/ns" >/dev/null || fail "$1: the churned names differ"
	diff -r "$TMP/snap100" "$1/snap100" >/dev/null || fail "$1: the snapshot differs"
	diff -r "$TMP/v200" "$1/ns/.versions/v200" >/dev/null || fail "$1: the version differs"
}
check_all "$A"
check_all "$B"
umount_vol "$A"
umount_vol "$B"
ok "every file, the snapshot and the version read back on both clients"

# --- the checks
"$GRANARY" fsck "$META" --objects -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --objects is not clean: $(head -20 "$TMP/fsck.out")"
"$GRANARY" gc "$META" --json -q --min-age 0 >"$TMP/gc.json" || fail "gc failed"
check_eq "$(jq .leaked "$TMP/gc.json")" "$LEAK" "objects gc finds leaked"
check_eq "$(jq .young "$TMP/gc.json")" 0 "young objects"
"$GRANARY" gc "$META" --json -q --min-age 0 --delete >"$TMP/gc.json" || fail "gc --delete failed"
check_eq "$(jq .deleted "$TMP/gc.json")" "$LEAK" "objects gc deleted"
"$GRANARY" gc "$META" --json -q --min-age 0 >"$TMP/gc.json" || fail "gc failed"
"$GRANARY" fsck "$META" --deep -q --json >"$TMP/fsck.json" 2>"$TMP/fsck.err" ||
	fail "fsck --deep is not clean after gc: $(head -c 2000 "$TMP/fsck.json")"
n=$(count_objects)
check_eq "$(jq .leaked "$TMP/gc.json")" 0 "objects leaked after gc --delete"
check_eq "$(jq .live "$TMP/gc.json")" "$n" "gc's live objects vs the store's"
# fsck counts what files reference; gc also what waits for reclamation
# (slices compactions replaced, kept an hour for readers)
check_eq $(($(jq .objects "$TMP/fsck.json") + $(jq .live_pending "$TMP/gc.json"))) "$n" \
	"fsck's referenced objects and those waiting for reclamation vs the store's"
mount_vol "$META" "$A" $OPTS
check_all "$A"
ok "fsck clean; gc found exactly the $LEAK objects the kills leaked and deleted them; the store holds exactly the $n objects the metadata references; every file reads back"
