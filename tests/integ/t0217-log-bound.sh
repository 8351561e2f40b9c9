#!/bin/bash
# storage: file
# t0217-log-bound.sh - the client log of a real mount stays under its bound
# when flooded (-d logs every FUSE request): --log-max-size and --log-keep
# files; --log-level filters; SIGHUP reopens a log moved by logrotate and
# does not end the mount; bad values are refused. Log files are created
# 0600 (the access log too); a mode the operator gave one stays.
. "$(dirname "$0")/lib.sh"

new_volume logs
M=$TMP/mnt
mkdir -p "$M"
L=$TMP/client.log

expect_exit 2 "bad --log-level 'loud'" "$GRANARY" mount "$META" "$M" --log-level loud
expect_exit 2 "bad size '1K' for --log-max-size" "$GRANARY" mount "$META" "$M" --log-max-size 1K
expect_exit 2 "bad count '0' for --log-keep" "$GRANARY" mount "$META" "$M" --log-keep 0
ok "bad --log-level, --log-max-size, --log-keep: usage errors"

# --- flood: a debug line per whole-file copy_file_range (a clone), 1800
# of them (~200K of log), a 64K bound, 3 files
mount_vol "$META" "$M" --log-level debug --log "$L" --log-max-size 64K --log-keep 3
mkdir "$M/d" "$M/c"
for i in $(seq 1 20); do echo "$i" >"$M/d/f$i"; done
/usr/bin/python3 - "$M/d/f1" "$M/c" <<'EOF2' || fail "the copy_file_range flood failed"
import os, sys
src = os.open(sys.argv[1], os.O_RDONLY)
for i in range(1800):
    dst = os.open(f"{sys.argv[2]}/c{i}", os.O_WRONLY | os.O_CREAT, 0o644)
    os.copy_file_range(src, dst, 2, 0, 0)
    os.close(dst)
EOF2
check_eq "$(cat "$M/c/c1799")" 1 "the last copy"
[ -s "$L.1" ] || fail "no rotation after a flood: $(ls -l "$TMP" | grep client)"
[ -s "$L.2" ] || fail "only one rotation: $(ls -l "$TMP" | grep client)"
[ -e "$L.3" ] && fail "a 4th log file with --log-keep 3"
for f in "$L" "$L.1" "$L.2"; do
	s=$(stat -c %s "$f")
	[ "$s" -le 65536 ] || fail "$f is $s bytes, over the 64K bound"
done
grep -q " DEBUG .*copy_file_range" "$L.1" || fail "no DEBUG lines with --log-level debug"
check_eq "$(cat "$L" "$L.1" "$L.2" | grep -c 'copy_file_range: ')" \
	"$(cat "$L" "$L.1" "$L.2" | grep -c '^20[0-9-]* [0-9:.]* DEBUG .*copy_file_range: inode [0-9]* shares the 2 bytes of [0-9]*$')" \
	"whole lines across rotations"
for f in "$L" "$L.1" "$L.2"; do
	check_eq "$(stat -c %a "$f")" 600 "mode of $f (names and uids are in it)"
done
ok "a flooded client log is rotated: 3 files, each at most 64K, each 0600"

# --- SIGHUP: reopen a moved log, the mount goes on
pids=$(mount_pids "$M" 2>/dev/null)
mv "$L" "$TMP/rotated.log"
kill -HUP $pids
sleep 0.2
# the file is reopened by the next line: a clone logs one
/usr/bin/python3 -c 'import os, sys
s = os.open(sys.argv[1], os.O_RDONLY); d = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
os.copy_file_range(s, d, 2, 0, 0)' "$M/d/f1" "$M/c/after-hup"
wait_until 10 grep -q "copy_file_range" "$L" || fail "no new log after SIGHUP"
grep -q "copy_file_range" "$TMP/rotated.log" || fail "the moved log lost its lines"
check_eq "$(cat "$M/d/f7")" 7 "a read after SIGHUP"
for p in $pids; do kill -0 "$p" || fail "SIGHUP ended the client"; done
ok "SIGHUP reopens the log moved away; the mount goes on"
umount_vol "$M"

# --- --log-level warn: no INFO lines (mount and umount log INFO)
mount_vol "$META" "$M" --log "$TMP/warn.log" --log-level warn
cat "$M/d/f1" >/dev/null
umount_vol "$M"
grep -q " INFO " "$TMP/warn.log" && fail "INFO lines with --log-level warn: $(head -3 "$TMP/warn.log")"
mount_vol "$META" "$M" --log "$TMP/info.log"
umount_vol "$M"
grep -q " INFO .*mounted volume 'logs'" "$TMP/info.log" || fail "no INFO line by default: $(cat "$TMP/info.log")"
ok "--log-level warn drops INFO lines; the default keeps them"

# --- modes: new files 0600 (umask 022 or not), an existing file's stays
rm -f "$TMP/info.log"
touch "$TMP/group.log" && chmod 0640 "$TMP/group.log"
old_umask=$(umask)
umask 000
mount_vol "$META" "$M" --log "$TMP/info.log" --access-log "$TMP/access.log"
umask "$old_umask"
ls "$M/d" >/dev/null
umount_vol "$M"
check_eq "$(stat -c %a "$TMP/info.log")" 600 "mode of a new client log"
check_eq "$(stat -c %a "$TMP/access.log")" 600 "mode of a new access log"
mount_vol "$META" "$M" --log "$TMP/group.log"
umount_vol "$M"
check_eq "$(stat -c %a "$TMP/group.log")" 640 "mode of a log that was there"
ok "new client and access logs are 0600 (umask 000 too); an existing log keeps its mode"
