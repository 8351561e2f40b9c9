#!/bin/bash
# storage: file
# t0215-mount-helper.sh - tools/mount.granary as mount(8) runs it: `mount -t
# granary -o ...`, fstab lines by `mount -a -T FILE` and `mount -T FILE MP`,
# umount(8), -o ro, -f (fake), credentials files, and clear errors (exit 1)
# for bad options. mount(8) finds helpers in /sbin only: the test links
# /sbin/mount.granary to the worktree's for its duration (unless one is
# installed already: then those checks are skipped) and removes it after.
. "$(dirname "$0")/lib.sh"

HELPER=$TOPDIR/tools/mount.granary
export GRANARY_BIN=$GRANARY # mount(8) passes the environment on
new_volume helper
# a file and a subdirectory to mount alone
M0=$TMP/mnt0
mount_vol "$META" "$M0"
mkdir -p "$M0/datasets/imagenet"
echo "a sample" >"$M0/datasets/imagenet/sample"
echo top >"$M0/top"
umount_vol "$M0"

# helper_mounted MP: MP is a live granary mount (fuse.granary)
helper_mounted() {
	awk -v mp="$(realpath -m "$1")" '{ m = $5; gsub(/\\040/, " ", m) }
		m == mp && $0 ~ / - fuse\.granary / { f = 1 } END { exit !f }' \
		/proc/self/mountinfo
}

# daemon_pids MP: the granary clients serving MP (lib.sh's mount_pids, in
# one pgrep rather than two processes per /proc entry)
daemon_pids() {
	pgrep -a -x granary | awk -v mp="$1" 'index($0 " ", " " mp " ") { print $1 }'
}

# wait_daemon_gone PIDS: the daemons have exited (after umount(8), which
# does not wait for them as granary umount does)
wait_daemon_gone() {
	local p
	for p in $1; do
		for _ in $(seq 1 100); do
			kill -0 "$p" 2>/dev/null || continue 2
			sleep 0.1
		done
		fail "daemon $p still running 10 s after umount"
	done
}

# --- the helper alone: bad invocations are exit 1 with a clear message
M=$TMP/mnt
mkdir -p "$M"
expect_exit 1 "unknown option 'bogus'" "$HELPER" "$META" "$M" -o cache-dir=/x,bogus
expect_exit 1 "option 'cache-size' needs a value" "$HELPER" "$META" "$M" -o cache-size
expect_exit 1 "option 'writeback' takes no value" "$HELPER" "$META" "$M" -o writeback=1
expect_exit 1 "SOURCE and MOUNTPOINT are required" "$HELPER" "$META"
expect_exit 1 "unknown flag '-x'" "$HELPER" "$META" "$M" -x
# a value granary itself refuses is a usage error too
expect_exit 1 "bad size 'lots' for --cache-size" "$HELPER" "$META" "$M" -o cache-size=lots
# an unreachable redis is a mount failure: 32
expect_exit 32 "cannot mount" "$HELPER" "unix://$TMP/nosuch.sock" "$M" \
	-o "log=$TMP/log-fail.log"
is_mounted "$M" && fail "a failed helper left a mount"
ok "bad options, values and servers: the clear error, exit 1 (32 for a failed mount)"

# -s (sloppy) warns and goes on; -f (fake) with -v prints and mounts nothing
"$HELPER" "$META" "$M" -sfv -o bogus,_netdev,noauto,nofail,x-systemd.requires=redis.service,comment=c,cache-size=1G \
	>"$TMP/fake.out" 2>&1 || fail "fake mount failed: $(cat "$TMP/fake.out")"
grep -q "ignoring unknown option 'bogus'" "$TMP/fake.out" || fail "-s gave no warning: $(cat "$TMP/fake.out")"
grep -q -- "mount $META $M --cache-size 1G" "$TMP/fake.out" ||
	fail "-v did not print the command: $(cat "$TMP/fake.out")"
grep "^mount.granary: .* mount " "$TMP/fake.out" | grep -q "x-systemd\|_netdev\|nofail\|comment" &&
	fail "mount(8) options reached granary: $(cat "$TMP/fake.out")"
is_mounted "$M" && fail "-f mounted"
# the flags of the metrics, access log and encryption: mapped by name
"$HELPER" "$META" "$M" -fv -o metrics=127.0.0.1:9567,access-log=/var/log/a.log,encrypt-key=/etc/k,log-level=debug,writeback,ro \
	>"$TMP/fake3.out" 2>&1 || fail "fake mount failed: $(cat "$TMP/fake3.out")"
grep -q -- "--metrics 127.0.0.1:9567 --access-log /var/log/a.log --encrypt-key /etc/k --log-level debug --writeback --read-only$" \
	"$TMP/fake3.out" || fail "-o mapping: $(cat "$TMP/fake3.out")"
# -v hides the password of every URL form, as granary's own messages do
# (the helper asks the binary: one parser): '/', '@' and ':' inside it,
# user names, Sentinel lists, rediss://, a bare secret; unix:// has none.
# Each line: the URL, then what -v must show of it.
while read -r url want; do
	"$HELPER" "$url" "$M" -fv >"$TMP/fake2.out" 2>&1 ||
		fail "-fv of '$url' failed: $(cat "$TMP/fake2.out")"
	grep -q "PW" "$TMP/fake2.out" && fail "-v showed the password of '$url': $(cat "$TMP/fake2.out")"
	grep -qF -- "mount $want $M" "$TMP/fake2.out" ||
		fail "-v of '$url': want '$want' in: $(cat "$TMP/fake2.out")"
done <<'URLS'
redis://:s3PWcret@127.0.0.1:1/2 redis://:****@127.0.0.1:1/2
redis://:PW/with/slashes@127.0.0.1:1/2 redis://:****@127.0.0.1:1/2
redis://user:PW@at@127.0.0.1:1/2 redis://user:****@127.0.0.1:1/2
redis://user:PW:a/b@c@d@127.0.0.1/2?wait=1 redis://user:****@127.0.0.1/2?wait=1
redis://:PW@mymaster,127.0.0.1:26379,127.0.0.2/2 redis://:****@mymaster,127.0.0.1:26379,127.0.0.2/2
rediss://:PW@127.0.0.1:6380/0 rediss://:****@127.0.0.1:6380/0
redis://PWalone@127.0.0.1/1 redis://****@127.0.0.1/1
redis://127.0.0.1:1/2 redis://127.0.0.1:1/2
unix:///run/a@b/redis.sock?db=1 unix:///run/a@b/redis.sock?db=1
URLS
ok "-s ignores unknown options with a warning, -f mounts nothing, -v hides the password"

# --- the helper called directly: options mapped, subdir, credentials file
CRED=$TMP/cred.env
printf '# the volume of t0215\nGRANARY_META_URL="%s"\n' "$META" >"$CRED"
chmod 0644 "$CRED"
expect_exit 1 "readable by everyone" "$HELPER" granary "$M" -o "credentials=$CRED"
chmod 0600 "$CRED"
MOUNTS="$MOUNTS $M"
"$HELPER" granary "$M" -o "credentials=$CRED,subdir=/datasets,cache-dir=$TMP/cache-h,log=$TMP/log-mnt.log,_netdev,defaults" \
	>"$TMP/h.out" 2>&1 || fail "helper mount failed: $(cat "$TMP/h.out")"
helper_mounted "$M" || fail "the helper returned 0 but '$M' is no granary mount"
check_eq "$(cat "$M/imagenet/sample")" "a sample" "a file of the subdir"
[ -e "$M/top" ] && fail "subdir=/datasets shows the volume root"
[ -d "$TMP/cache-h" ] || fail "cache-dir= not passed: no $TMP/cache-h"
pids=$(daemon_pids "$M")
[ -n "$pids" ] || fail "no daemon serves $M"
umount "$M" || fail "umount(8) failed"
is_mounted "$M" && fail "still mounted after umount(8)"
wait_daemon_gone "$pids"
ok "the helper mounts (credentials file, subdir=, cache-dir=), returns when up; umount(8) unmounts"

# --- through mount(8): needs /sbin/mount.granary
LINKED=0
if [ -e /sbin/mount.granary ] && [ "$(readlink -f /sbin/mount.granary)" != "$(readlink -f "$HELPER")" ]; then
	skip "mount(8) checks: /sbin/mount.granary is installed already (not this tree's)"
	exit 0
fi
if [ ! -e /sbin/mount.granary ]; then
	ln -s "$HELPER" /sbin/mount.granary || fail "cannot link /sbin/mount.granary"
	LINKED=1
fi
unlink_helper() {
	if [ "$LINKED" = 1 ]; then rm -f /sbin/mount.granary; fi
	LINKED=0
}
# cleanup reads the test's exit status from $?: hand it on
trap 'rc=$?; set +eE; unlink_helper; (exit $rc); cleanup' EXIT

mount -t granary -o "cache-dir=$TMP/cache-m,subdir=datasets/imagenet,log=$TMP/log-mnt.log" "$META" "$M" \
	>"$TMP/m.out" 2>&1 || fail "mount -t granary failed: $(cat "$TMP/m.out")"
helper_mounted "$M" || fail "mount -t granary: not mounted"
check_eq "$(cat "$M/sample")" "a sample" "a file through mount -t granary"
echo new >"$M/written" || fail "cannot write through a rw mount"
pids=$(daemon_pids "$M")
umount "$M"
wait_daemon_gone "$pids"
ok "mount -t granary -o cache-dir=,subdir= URL MP, then umount"

# a bad option through mount(8): its message and exit code
rc=0
mount -t granary -o nosuchopt "$META" "$M" >"$TMP/m.out" 2>&1 || rc=$?
check_eq "$rc" 1 "exit code of mount -t granary -o nosuchopt"
grep -q "unknown option 'nosuchopt'" "$TMP/m.out" || fail "mount(8) lost the message: $(cat "$TMP/m.out")"
is_mounted "$M" && fail "mounted with a bad option"
# -f through mount(8): nothing mounted
mount -f -t granary "$META" "$M" >"$TMP/m.out" 2>&1 || fail "mount -f failed: $(cat "$TMP/m.out")"
is_mounted "$M" && fail "mount -f mounted"
ok "mount -t granary: a bad option is exit 1 with its name; -f mounts nothing"

# -o ro: reads work, writes fail with EROFS
mount -t granary -o "ro,cache-dir=$TMP/cache-m,log=$TMP/log-mnt.log" "$META" "$M" \
	>"$TMP/m.out" 2>&1 || fail "mount -o ro failed: $(cat "$TMP/m.out")"
check_eq "$(cat "$M/top")" top "a read on a ro mount"
expect_errno "Read-only file system" sh -c "echo x >'$M/nope'"
expect_errno "Read-only file system" rm "$M/top"
pids=$(daemon_pids "$M")
umount "$M"
wait_daemon_gone "$pids"
ok "-o ro: reads work, writes and removals fail with EROFS"

# --- fstab lines: mount -a -T FILE, mount -T FILE MP
M2=$TMP/mnt2
mkdir -p "$M2"
MOUNTS="$MOUNTS $M2"
FSTAB=$TMP/fstab
# a space in a path is \040 in fstab (fstab(5)); mount(8) decodes it
M3="$TMP/with space"
mkdir -p "$M3"
MOUNTS="$MOUNTS $M3"
M3_FSTAB=$(printf '%s' "$M3" | sed 's/ /\\040/g')
cat >"$FSTAB" <<EOF
# t0215's fstab
$META $M granary _netdev,nofail,cache-dir=$TMP/cache-m,log=$TMP/log-mnt.log,x-systemd.requires=redis-server.service 0 0
granary $M2 granary credentials=$CRED,subdir=/datasets,cache-dir=$TMP/cache-m2,log=$TMP/log-mnt2.log,comment=by-credentials 0 0
$META $M3_FSTAB granary noauto,ro,cache-dir=$TMP/cache-m3,log=$TMP/log-mnt3.log 0 0
EOF
mount -a -T "$FSTAB" >"$TMP/a.out" 2>&1 || fail "mount -a -T failed: $(cat "$TMP/a.out")"
helper_mounted "$M" || fail "mount -a: '$M' not mounted"
helper_mounted "$M2" || fail "mount -a: '$M2' not mounted"
is_mounted "$M3" && fail "mount -a mounted a noauto line"
check_eq "$(cat "$M/datasets/imagenet/written")" new "a file through the first fstab line"
check_eq "$(cat "$M2/imagenet/sample")" "a sample" "a file through the credentials line"
# mount -a again: what is mounted is left alone (the same daemons)
pids=$(daemon_pids "$M")
mount -a -T "$FSTAB" >"$TMP/a.out" 2>&1 || fail "a second mount -a failed: $(cat "$TMP/a.out")"
check_eq "$(daemon_pids "$M")" "$pids" "daemons of '$M' after a second mount -a"
# but another volume where one is mounted is an error
new_volume other
expect_exit 32 "helper is mounted there already" mount -t granary "$META" "$M"
mount -T "$FSTAB" "$M3" >"$TMP/a.out" 2>&1 || fail "mount -T FILE MP failed: $(cat "$TMP/a.out")"
helper_mounted "$M3" || fail "mount -T FILE '$M3': not mounted"
check_eq "$(cat "$M3/top")" top "a file through the noauto line with a \\040"
expect_errno "Read-only file system" touch "$M3/x"
pids=$( (daemon_pids "$M"; daemon_pids "$M2"; daemon_pids "$M3") 2>/dev/null)
umount "$M" "$M2" "$M3"
wait_daemon_gone "$pids"
for mp in "$M" "$M2" "$M3"; do
	helper_mounted "$mp" && fail "'$mp' still mounted"
done
ok "fstab: mount -a -T FILE (noauto skipped, credentials line), mount -T FILE MP (\\040), umount"

unlink_helper
[ -e /sbin/mount.granary ] && [ "$(readlink -f /sbin/mount.granary)" = "$(readlink -f "$HELPER")" ] &&
	fail "/sbin/mount.granary left behind"
ok "/sbin/mount.granary removed"
