#!/bin/sh
# demo.sh start|stop STATE_DIR MOUNTPOINT GRANARY_BIN - the `make demo`
# volume: a local redis-server on a unix socket in STATE_DIR, a file://
# volume in STATE_DIR/data, mounted on MOUNTPOINT. Idempotent both ways;
# touches nothing outside STATE_DIR and MOUNTPOINT; stop keeps the data.
set -eu

usage() {
	echo "usage: $0 start|stop STATE_DIR MOUNTPOINT GRANARY_BIN" >&2
	exit 2
}
[ $# -eq 4 ] || usage
action=$1 bin=$4
case $action in start|stop) ;; *) usage ;; esac

say() { echo "demo: $*"; }
die() { echo "demo: $*" >&2; exit 1; }

# Absolute paths: the daemons below do not run in this directory.
mkdir -p "$2" || die "cannot create state directory '$2'"
state=$(cd "$2" && pwd -P)
case $3 in /*) mnt=$3 ;; *) mnt=$(pwd -P)/$3 ;; esac
case $bin in /*) ;; *) bin=$(pwd -P)/$bin ;; esac
sock=$state/redis.sock
pidfile=$state/redis.pid
meta="unix://$sock?db=0"

# Is MOUNTPOINT a granary mount? (/proc/mounts escapes spaces as \040)
is_mounted() {
	awk -v mp="$(printf '%s' "$mnt" | sed 's/ /\\040/g')" \
		'$2 == mp && $3 == "fuse.granary" { found = 1 } END { exit !found }' \
		/proc/self/mounts
}

# The pid in redis.pid, only if that process really is our redis-server.
redis_pid() {
	[ -r "$pidfile" ] || return 1
	pid=$(cat "$pidfile")
	case $pid in ''|*[!0-9]*) return 1 ;; esac
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q redis-server ||
		return 1
	echo "$pid"
}

redis_ping() {
	redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG
}

start() {
	if ! command -v redis-server >/dev/null ||
		! command -v redis-cli >/dev/null; then
		die "redis-server is not installed: run 'make deps'"
	fi
	[ -x "$bin" ] || die "'$bin' is missing: run 'make'"

	if redis_pid >/dev/null && redis_ping; then
		say "redis is already running on $sock"
	else
		rm -f "$pidfile"
		# Persistence on, so the volume survives a restart of redis.
		redis-server --port 0 --unixsocket "$sock" \
			--unixsocketperm 700 --daemonize yes \
			--pidfile "$pidfile" --logfile "$state/redis.log" \
			--dir "$state" --save "60 1" --appendonly no ||
			die "redis-server did not start (see $state/redis.log)"
		i=0
		until redis_ping; do
			i=$((i + 1))
			[ $i -lt 100 ] ||
				die "redis-server does not answer on $sock (see $state/redis.log)"
			sleep 0.05
		done
		say "started redis on $sock"
	fi

	if "$bin" status "$meta" >/dev/null 2>&1; then
		say "reusing volume 'demo' in $state"
	elif out=$("$bin" upgrade "$meta" 2>&1); then
		# a volume made by an older granary (it is not mounted: the
		# upgrade refuses while a client is alive)
		say "$out"
	elif printf '%s' "$out" | grep -q "no granary volume"; then
		mkdir -p "$state/data"
		"$bin" format "$meta" demo --storage "file://$state/data"
	else
		printf '%s\n' "$out" >&2
		die "cannot use the volume in $state"
	fi

	if is_mounted; then
		say "already mounted on $mnt"
	else
		mkdir -p "$mnt"
		"$bin" mount "$meta" "$mnt" --log "$state/granary.log" \
			--cache-dir "$state/cache" --cache-size 1G
		sleep 0.2
		is_mounted || {
			tail -n 5 "$state/granary.log" >&2
			die "the mount on $mnt stopped right after it started (log: $state/granary.log)"
		}
		say "mounted volume 'demo' on $mnt (log: $state/granary.log)"
	fi

	cat <<EOF

Try it:
  cd '$mnt'
  cp /etc/os-release . && cat os-release
  dd if=/dev/urandom of=big bs=1M count=100 && ls -l
  $bin status '$meta'
Data blocks go to $state/data, metadata to redis ($sock).
When done: make demo-stop   (keeps the data; 'make demo' mounts it again)
EOF
}

stop() {
	if is_mounted; then
		if [ -x "$bin" ]; then
			"$bin" umount "$mnt" ||
				die "could not unmount $mnt; redis keeps running"
		else
			fusermount3 -u "$mnt" ||
				die "could not unmount $mnt; redis keeps running"
		fi
		say "unmounted $mnt"
	else
		say "$mnt is not mounted"
	fi

	if pid=$(redis_pid); then
		kill "$pid"
		i=0
		while kill -0 "$pid" 2>/dev/null; do
			i=$((i + 1))
			[ $i -lt 200 ] || die "redis-server (pid $pid) does not stop"
			sleep 0.05
		done
		say "stopped redis (pid $pid); it saved its data in $state"
	else
		say "redis is not running"
	fi
	say "the volume is kept in $state; to delete it: rm -rf '$state'"
}

$action
