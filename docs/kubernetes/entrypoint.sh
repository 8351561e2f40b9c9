#!/bin/sh
# entrypoint.sh - the DaemonSet's container process (PID 1 under tini):
# wait for Redis, mount the volume with `granary mount --foreground` and
# flags from the environment, turn SIGTERM (pod deletion, node drain) into
# a clean `granary umount` (buffered writes uploaded first), and exit
# non-zero if the mount dies on its own so that the kubelet restarts it.
#
# Env (the Secret gives the URL and keys; the DaemonSet the rest):
#   GRANARY_META_URL        redis://[:PASSWORD@]HOST:PORT/DB (required)
#   GRANARY_MOUNTPOINT      where to mount (default /mnt/granary)
#   GRANARY_CACHE_DIR       disk cache (default /var/cache/granary)
#   GRANARY_CACHE_SIZE      disk cache limit (default 100G)
#   GRANARY_METRICS         --metrics address, when the binary has it
#                           (default 0.0.0.0:9567; off: none)
#   GRANARY_CACHE_GROUP     --cache-group NAME: share the disk caches of
#                           the nodes that name it (default: none)
#   GRANARY_GROUP_ADDR      --group-addr HOST:PORT, where the other members
#                           reach this node (default: POD_IP, from the
#                           downward API, and GRANARY_GROUP_PORT)
#   GRANARY_GROUP_PORT      its port when it comes from POD_IP (default 9568)
#   GRANARY_GROUP_TAKE_ONLY 1: --group-take-only (serve nothing)
#   GRANARY_MOUNT_FLAGS     more `granary mount` flags, space separated
#   GRANARY_WAIT_REDIS      seconds to wait for Redis (default 300)
#   GRANARY_ENCRYPT_KEY_FILE, GRANARY_S3_ACCESS_KEY, GRANARY_S3_SECRET_KEY,
#   GRANARY_META_PASSWORD   read by granary itself
#   GRANARY_BIN             the binary (default: granary in PATH)
set -u

bin=${GRANARY_BIN:-granary}
url=${GRANARY_META_URL:-}
mp=${GRANARY_MOUNTPOINT:-/mnt/granary}
cache_dir=${GRANARY_CACHE_DIR:-/var/cache/granary}
cache_size=${GRANARY_CACHE_SIZE:-100G}
metrics=${GRANARY_METRICS:-0.0.0.0:9567}
wait_s=${GRANARY_WAIT_REDIS:-300}

say() { echo "granary-entrypoint: $*" >&2; }

[ -n "$url" ] || { say "GRANARY_META_URL is not set"; echo "hint: put it in the Secret (docs/kubernetes/secret.yaml)" >&2; exit 2; }
command -v "$bin" >/dev/null || { say "no granary binary '$bin'"; exit 2; }

# ---- wait for Redis: `granary status` answers once it is reachable --------
start=$(date +%s)
until "$bin" status "$url" >/dev/null 2>&1; do
	if [ $(($(date +%s) - start)) -ge "$wait_s" ]; then
		say "redis not reachable after ${wait_s}s:"
		"$bin" status "$url" >&2
		exit 1
	fi
	sleep 2
done

# ---- a mount left by a previous container (killed without unmounting) ------
if awk -v mp="$mp" '$5 == mp { f = 1 } END { exit !f }' /proc/self/mountinfo; then
	say "unmounting a stale mount at '$mp'"
	"$bin" umount "$mp" >&2 2>&1 || fusermount3 -uz "$mp" 2>/dev/null || umount -l "$mp"
fi
mkdir -p "$mp" "$cache_dir" || exit 1

# --metrics only where the binary has it (a client built before it has not)
set -- --cache-dir "$cache_dir" --cache-size "$cache_size"
if [ "$metrics" != off ] && "$bin" mount --help 2>&1 | grep -q -- --metrics; then
	set -- "$@" --metrics "$metrics"
fi
# the cache group: the address the other nodes reach this one at is the
# pod's (the node's with hostNetwork), never a wildcard
if [ -n "${GRANARY_CACHE_GROUP:-}" ]; then
	set -- "$@" --cache-group "$GRANARY_CACHE_GROUP"
	if [ "${GRANARY_GROUP_TAKE_ONLY:-0}" = 1 ]; then
		set -- "$@" --group-take-only
	else
		addr=${GRANARY_GROUP_ADDR:-}
		if [ -z "$addr" ] && [ -n "${POD_IP:-}" ]; then
			case $POD_IP in
			*:*) addr="[$POD_IP]:${GRANARY_GROUP_PORT:-9568}" ;;
			*) addr="$POD_IP:${GRANARY_GROUP_PORT:-9568}" ;;
			esac
		fi
		if [ -z "$addr" ]; then
			say "GRANARY_CACHE_GROUP needs GRANARY_GROUP_ADDR, or POD_IP (fieldRef status.podIP)"
			exit 2
		fi
		set -- "$@" --group-addr "$addr"
	fi
fi
# shellcheck disable=SC2086 # word splitting of the flags is wanted
set -- "$@" ${GRANARY_MOUNT_FLAGS:-}

# ---- mount in the foreground, as a child we can wait for -------------------
# --foreground keeps the client our child: its exit is the mount's end.
"$bin" mount "$url" "$mp" --foreground "$@" &
child=$!
stopping=0

# shellcheck disable=SC2317 # run by the trap
on_term() {
	stopping=1
	say "SIGTERM: unmounting '$mp'"
	# granary umount waits for the client to upload what it buffered; if
	# it cannot unmount (files still open in pods), detach lazily.
	"$bin" umount "$mp" >&2 || "$bin" umount --lazy "$mp" >&2
}
trap on_term TERM INT

# wait returns early when a trapped signal arrives: wait again for the child
while :; do
	wait "$child"
	rc=$?
	kill -0 "$child" 2>/dev/null || break
done
if [ "$stopping" = 1 ]; then
	wait "$child" 2>/dev/null
	say "unmounted; exiting"
	exit 0
fi
say "the mount at '$mp' ended on its own (status $rc)"
# a client that died leaves the kernel's mount behind: clear it so the
# restarted container (and the pods' host path) see a plain directory
awk -v mp="$mp" '$5 == mp { f = 1 } END { exit !f }' /proc/self/mountinfo &&
	fusermount3 -uz "$mp" 2>/dev/null
[ "$rc" = 0 ] && rc=1
exit "$rc"
