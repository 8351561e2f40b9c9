#!/bin/bash
# t0230-quota-moved.sh - a file another client moves or removes while this
# one writes it is charged where it is (meta/SCHEMA.md "Inode record",
# parent field): mv from /qd to /qc on mount B while mount A writes
# leaves /qc with the file's bytes and /qd with none, and `quota check`
# agrees without --repair; rm on B while A writes, then `trash purge
# --all`: the trash's bytes in `status` are the entry's size before the
# purge, and the usage ends where check puts it. `quota set` says when
# the mounts see a quota.
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
new_volume qmoved --trash-days 1
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"
random_file "$TMP/src" $((2 * MIB))
mkdir "$A/qd" "$A/qc"
for d in /qd /qc; do
	"$GRANARY" quota set "$META" --path $d --capacity 1G >"$TMP/qset.out" 2>&1 ||
		fail "quota set $d: $(cat "$TMP/qset.out")"
	grep -q "^mounted clients see the change within about a second$" "$TMP/qset.out" ||
		fail "quota set does not say when the clients see it: $(cat "$TMP/qset.out")"
done
# both clients read the quotas' generation about once a second: A's
# gate then holds /qd's quota for what it writes there
wait_until 10 quota_seen "$A" "$B" || fail "the clients do not enforce the new quotas"

qfield() { # qfield DIR FIELD: a number of `quota get --json`
	"$GRANARY" quota get "$META" --path "$1" --json | tr -d ' \n' |
		sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"
}
status_of() { # status_of FIELD: a number of `granary status --json`
	"$GRANARY" status "$META" --json | tr -d ' \n' |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
check_clean() { # check_clean WHEN: quota check finds no difference
	local rc=0
	"$GRANARY" quota check "$META" >"$TMP/check.out" 2>&1 || rc=$?
	check_eq "$rc" 0 "quota check $1 (no --repair): $(cat "$TMP/check.out")"
}

# writer PATH: on mount A, write the first MiB of src to PATH and fsync
# (committed while the file is where it was made), say so ($TMP/ready),
# wait for $TMP/go, write the second MiB, fsync, say so ($TMP/ready2),
# wait for $TMP/go2, close
writer() {
	rm -f "$TMP/ready" "$TMP/go" "$TMP/ready2" "$TMP/go2"
	python3 - "$1" "$TMP/src" "$TMP" <<'EOF' &
import os, sys, time
path, src, tmp = sys.argv[1:4]
data = open(src, 'rb').read()
half = len(data) // 2
def wait(name):
    while not os.path.exists(os.path.join(tmp, name)):
        time.sleep(0.05)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data[:half])
os.fsync(fd)
open(os.path.join(tmp, 'ready'), 'w').close()
wait('go')
os.write(fd, data[half:])
os.fsync(fd)
open(os.path.join(tmp, 'ready2'), 'w').close()
wait('go2')
os.close(fd)
EOF
	WRITER=$!
	bg_track "$WRITER"
}
ready() { [ -e "$TMP/ready" ]; }
ready2() { [ -e "$TMP/ready2" ]; }
writer_done() {
	local rc=0
	wait "$WRITER" || rc=$?
	BG_PIDS=""
	check_eq "$rc" 0 "the writer on A"
}

# --- mv on B while A writes: charged where the file is
writer "$A/qd/f"
wait_until 30 ready || fail "the writer on A did not write its first MiB"
check_eq "$(qfield /qd used_space)" $MIB "/qd's bytes after the first MiB"
mv "$B/qd/f" "$B/qc/f" || fail "mv on B failed"
touch "$TMP/go"
wait_until 30 ready2 || fail "the writer on A did not write its second MiB"
touch "$TMP/go2"
writer_done
cmp "$TMP/src" "$B/qc/f" || fail "the moved file does not read back on B"
check_eq "$(qfield /qc used_space)" $((2 * MIB)) "/qc's bytes"
check_eq "$(qfield /qc used_inodes)" 1 "/qc's inodes"
check_eq "$(qfield /qd used_space)" 0 "/qd's bytes"
check_eq "$(qfield /qd used_inodes)" 0 "/qd's inodes"
check_clean "after the move"
ok "a file moved by another client while written is charged where it is now"

# --- rm on B while A writes, then purge: back to what check counts
used0=$(status_of used_bytes)
writer "$A/qd/g"
wait_until 30 ready || fail "the writer on A did not write its first MiB"
check_eq "$(qfield /qd used_space)" $MIB "/qd's bytes while g is written"
rm "$B/qd/g" || fail "rm on B failed"
check_eq "$(qfield /qd used_space)" 0 "/qd's bytes once g is removed"
touch "$TMP/go"
wait_until 30 ready2 || fail "the writer on A did not write its second MiB"
touch "$TMP/go2"
writer_done
check_eq "$(qfield /qd used_space)" 0 "/qd's bytes after writes to the removed g"
check_eq "$(qfield /qd used_inodes)" 0 "/qd's inodes after writes to the removed g"
"$GRANARY" trash list "$META" --json >"$TMP/trash.json" ||
	fail "trash list failed"
check_eq "$(jq '[.[] | select(.name == "g")] | length' "$TMP/trash.json")" 1 \
	"entries of g in the trash"
stored=$(jq '.[] | select(.name == "g") | .stored' "$TMP/trash.json")
check_eq "$stored" $((2 * MIB)) "g's stored bytes in the trash"
check_eq "$(status_of trash_bytes)" "$stored" "the trash's bytes in status against g's entry"
check_clean "with g in the trash"
"$GRANARY" trash purge "$META" --all >"$TMP/purge.out" 2>&1 ||
	fail "trash purge --all: $(cat "$TMP/purge.out")"
check_eq "$(status_of trash_bytes)" 0 "the trash's bytes after the purge"
check_eq "$(status_of used_bytes)" "$used0" "the volume's bytes after the purge"
check_eq "$(qfield /qd used_space)" 0 "/qd's bytes after the purge"
check_eq "$(qfield /qc used_space)" $((2 * MIB)) "/qc's bytes after the purge"
check_clean "after the purge"
ok "rm of a file being written: the trash counts its writes, the purge leaves the usage check computes"

umount_vol "$B"
umount_vol "$A"
