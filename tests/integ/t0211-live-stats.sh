#!/bin/bash
# storage: file
# t0211-live-stats.sh - `granary stats --watch` in a terminal (tmux): the
# screen shows its headings and figures that move under a workload, and
# Ctrl-C ends it with 0; the access log: one line per operation with its
# name, result (an ENOENT lookup says ENOENT) and latency, written to a
# new file after logrotate's move, with SIGHUP or without.
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || fail "tmux is missing: run make deps"

new_volume live
M=$TMP/mnt
mount_vol "$META" "$M" --metrics off --access-log "$TMP/access.log"
mkdir "$M/d"

expect_exit 2 "json.*watch" "$GRANARY" stats "$M" --watch --json
expect_exit 2 "bad --interval" "$GRANARY" stats "$M" --watch --interval 0
expect_exit 1 "not a granary mount" "$GRANARY" stats "$TMP" --watch
ok "stats --watch: bad uses refused"

# a workload that keeps every figure moving
(
	i=0
	while :; do
		i=$((i + 1))
		echo "line $i" >"$M/d/f$((i % 20))"
		cat "$M/d/f$((i % 20))" >/dev/null
		sleep 0.01
	done
) &
bg_track $!
SOCK=$TMP/tmux.sock
tmux -S "$SOCK" new-session -d -s watch -x 120 -y 45 \
	"$GRANARY stats $M --watch --interval 0.5; echo \$? >$TMP/watch.rc; sleep 60"
bg_track "$(tmux -S "$SOCK" display-message -p '#{pid}')"
screen_has() { tmux -S "$SOCK" capture-pane -p -t watch | grep -q "$1"; }
wait_until 10 screen_has "WRITE BUFFER" || fail "the watch screen never drew: $(tmux -S "$SOCK" capture-pane -p -t watch)"
sleep 1
tmux -S "$SOCK" capture-pane -p -t watch >"$TMP/screen1"
sleep 2
tmux -S "$SOCK" capture-pane -p -t watch >"$TMP/screen2"
for h in "FUSE OPS" "THROUGHPUT" "STORE" "REDIS" "CACHE HITS" "WRITE BUFFER" "p99 ms"; do
	grep -q "$h" "$TMP/screen2" || fail "no '$h' on the screen: $(cat "$TMP/screen2")"
done
# the figures, not the clock: the first line has the time
cmp -s <(tail -n +2 "$TMP/screen1") <(tail -n +2 "$TMP/screen2") &&
	fail "no figure changed in 2 s: $(cat "$TMP/screen2")"
grep -Eq '^  write +[1-9][0-9.]* ' "$TMP/screen2" ||
	fail "no writes/s shown under a writing workload: $(cat "$TMP/screen2")"
ok "stats --watch shows the headings and moving figures"

tmux -S "$SOCK" send-keys -t watch C-c
wait_until 10 test -s "$TMP/watch.rc" || fail "Ctrl-C did not end stats --watch"
check_eq "$(cat "$TMP/watch.rc")" 0 "the exit status of stats --watch after Ctrl-C"
tmux -S "$SOCK" kill-server
for p in $BG_PIDS; do kill "$p" 2>/dev/null || true; done
BG_PIDS=""
ok "Ctrl-C ends it with 0"

ls "$M/no-such-name" 2>/dev/null && fail "a missing name was found"
echo hello >"$M/d/hello"
cat "$M/d/hello" >/dev/null
# the writer empties its buffer every 200 ms
line_of() { grep -E "$1" "$TMP/access.log" | tail -n 1; }
wait_until 5 grep -q 'name="no-such-name" result=ENOENT' "$TMP/access.log" ||
	fail "no ENOENT lookup in the access log: $(tail -n 5 "$TMP/access.log")"
l=$(line_of ' lookup ino=1 name="no-such-name" result=ENOENT us=[0-9]+$')
[[ $l =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\ lookup ]] ||
	fail "the ENOENT lookup line: '$l'"
wait_until 5 grep -qE ' create ino=[0-9]+ name="hello" result=0 us=[0-9]+$' "$TMP/access.log" ||
	fail "no create of hello in the access log"
wait_until 5 grep -qE ' read ino=[0-9]+ result=0 us=[0-9]+$' "$TMP/access.log" ||
	fail "no read in the access log"
ok "the access log records ops with name, result and latency"

pid=$(mount_pids "$M" 2>/dev/null)
[ -n "$pid" ] || fail "no daemon found for $M"
mv "$TMP/access.log" "$TMP/access.log.1"
kill -HUP $pid
sleep 0.5
ls "$M/after-hup" 2>/dev/null || true
wait_until 5 grep -q 'name="after-hup"' "$TMP/access.log" ||
	fail "no new access log after mv and SIGHUP"
! grep -q 'name="after-hup"' "$TMP/access.log.1" || fail "the moved log got the new lines"
is_mounted "$M" && ls "$M/d" >/dev/null || fail "SIGHUP ended the mount"
ok "after mv and SIGHUP the log is opened anew; the mount goes on"

mv "$TMP/access.log" "$TMP/access.log.2"
sleep 1.5 # noticed within a second without a signal
ls "$M/after-move" 2>/dev/null || true
wait_until 5 grep -q 'name="after-move"' "$TMP/access.log" ||
	fail "no new access log after a move without SIGHUP"
ok "a move alone is noticed too"

getfattr --absolute-names --only-values -n granary.stats "$M" |
	grep -q '"access_log": {"lines": [1-9][0-9]*, "dropped": 0}' ||
	fail "the access log's counts in granary.stats"
umount_vol "$M"

mkdir -p "$TMP/m2"
expect_exit 1 "cannot open the access log" "$GRANARY" mount "$META" "$TMP/m2" \
	--log "$TMP/log-m2.log" --access-log "$TMP/no/such/dir/a.log"
! is_mounted "$TMP/m2" || fail "mounted with an access log it cannot open"
ok "an access log that cannot be opened fails the mount"
