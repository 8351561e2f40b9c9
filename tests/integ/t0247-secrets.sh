#!/bin/bash
# t0247-secrets.sh - secrets do not outlive their use in a mount's
# environment, nor leave the process: a mount given its key as
# GRANARY_ENCRYPT_PASSPHRASE (and S3 keys in the environment) no
# longer shows them in /proc/PID/environ once it is up,
# also when it ran itself again for a mount point spelled another way;
# granary processes are not dumpable (no core file, no ptrace or /proc
# reading by the same user), unless GRANARY_CORE_DUMPS=1 asks for cores.
. "$(dirname "$0")/lib.sh"

unset GRANARY_ENCRYPT_KEY_FILE GRANARY_ENCRYPT_PASSPHRASE
PASS="passphrase-of-t0247-$$-Zq9"
GRANARY_ENCRYPT_PASSPHRASE=$PASS new_volume sec
export GRANARY_ENCRYPT_PASSPHRASE=$PASS

# env_of PID: its environment as the kernel shows it, one a line
env_of() { tr '\0' '\n' <"/proc/$1/environ"; }

M=$TMP/mnt
mount_vol "$META" "$M"
echo "sealed" >"$M/f"
pid=$(mount_pids "$M")
[ -n "$pid" ] || fail "no daemon serves $M"
env_of "$pid" >"$TMP/env1"
grep -qF "$PASS" "$TMP/env1" && fail "the passphrase is in /proc/$pid/environ"
grep -q "^GRANARY_ENCRYPT_PASSPHRASE=" "$TMP/env1" &&
	fail "GRANARY_ENCRYPT_PASSPHRASE is still set in the mount"
if [ -n "${GRANARY_S3_SECRET_KEY:-}" ]; then
	grep -qxF "GRANARY_S3_SECRET_KEY=$GRANARY_S3_SECRET_KEY" "$TMP/env1" &&
		fail "the S3 secret key is in /proc/$pid/environ"
fi
grep -q "^HOME=\|^PATH=" "$TMP/env1" || fail "the rest of the environment went too: $(head -c 300 "$TMP/env1")"
umount_vol "$M"
# the mount point spelled another way: the daemon runs itself again
# (with the environment) before it wipes it
mkdir -p "$TMP/sub"
mount_vol "$META" "$TMP/sub/../mnt"
pid=$(mount_pids "$M")
[ -n "$pid" ] || fail "no daemon serves $M (given as $TMP/sub/../mnt)"
check_eq "$(cat "$M/f")" sealed "the file, read with the key from the environment"
env_of "$pid" | grep -qF "$PASS" && fail "the passphrase is in /proc/$pid/environ (re-run)"
umount_vol "$M"
ok "a mount's environment no longer holds the passphrase nor the S3 secret once it is up"

# dumpable: /proc/PID/ of a process that is not belongs to root; a granary
# process run as nobody (redact-url, answering lines of its stdin: an
# answer shows it is past its start) shows it
mkfifo "$TMP/in" "$TMP/out"
owner_of() { # owner_of [ENV=VALUE]: the owner of its /proc/PID/environ
	local p line
	env "$@" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$GRANARY" redact-url <"$TMP/in" >"$TMP/out" &
	p=$!
	exec 3>"$TMP/in" 4<"$TMP/out"
	echo "redis://:pw@127.0.0.1/1" >&3
	read -r -t 10 line <&4 || fail "granary redact-url did not answer"
	[ "$line" = "redis://:****@127.0.0.1/1" ] || fail "granary redact-url: '$line'"
	stat -c %U "/proc/$p/environ"
	exec 3>&- 4<&-
	wait "$p"
}
check_eq "$(owner_of X=1)" root "owner of /proc/PID of a granary process run as nobody"
check_eq "$(owner_of GRANARY_CORE_DUMPS=1)" nobody "the same with GRANARY_CORE_DUMPS=1"
ok "granary processes are not dumpable (GRANARY_CORE_DUMPS=1: they are)"
