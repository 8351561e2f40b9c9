#!/bin/bash
# t0268-group-crypt.sh - an encrypted volume in a cache group (issue 33):
# members hold and exchange ciphertext only (the group store is below the
# sealing layer): after an epoch read by every member, served across the
# group, no cache directory holds a byte of the plaintext marker, and
# every byte reads back right; the same files of a volume that is not
# encrypted leave the marker in the caches (the check can fail).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

unset GRANARY_ENCRYPT_KEY_FILE GRANARY_ENCRYPT_PASSPHRASE
KEY=$TMP/key
head -c 32 /dev/urandom | base64 >"$KEY"
MARK="granary-plaintext-marker-$$-t0268"

# write_files DIR: small files (packed) and big ones of 2 and 3 blocks,
# the marker in each
write_files() {
	local i
	mkdir -p "$1"
	for i in $(seq 1 30); do printf '%s small %d\n' "$MARK" "$i" >"$1/s$i"; done
	for i in 1 2 3; do
		{
			for j in $(seq 1 2000); do echo "$MARK line $j"; done
			head -c $(((4 + i) << 20)) /dev/urandom
		} >"$1/b$i"
	done
	(cd "$1" && md5sum -- *) >"$TMP/sums"
}
# caches_hold: some member's cache holds the marker
caches_hold() { grep -rqaF "$MARK" "$TMP"/cache-m[1-3]; }

for vol in plain enc; do
	if [ $vol = enc ]; then
		group_volume enc --compress none --encrypt "$KEY"
		K=(--encrypt-key "$KEY")
	else
		group_volume plain --compress none
		K=()
	fi
	rm -rf "$TMP"/cache-m[0-3]
	mount_vol "$META" "$TMP/m0" "${K[@]}"
	write_files "$TMP/m0/ds"
	umount_vol "$TMP/m0"
	for n in 1 2 3; do gmount "$n" "${K[@]}"; done
	for n in 1 2 3; do
		wait_until 15 gmembers "$n" 3 || fail "member $n lists $(gfig "$n" members) members"
	done
	for n in 1 2 3; do epoch "$TMP/m$n" ds || fail "$vol: member $n read wrong bytes"; done
	served=$(( $(gfig 1 served) + $(gfig 2 served) + $(gfig 3 served) ))
	[ "$served" -ge 3 ] || fail "$vol: the members served $served requests to each other"
	if [ $vol = plain ]; then
		caches_hold || fail "the caches of a plain volume do not hold the marker: the check cannot fail"
		ok "plain volume: the members' caches hold the plaintext (the check can see it)"
	else
		! caches_hold || fail "a member's cache holds plaintext of the encrypted volume: $(grep -rlaF "$MARK" "$TMP"/cache-m[1-3] | head -3)"
		ok "encrypted volume: every byte right, $served requests served between members, no plaintext in any cache"
	fi
	for n in 1 2 3; do umount_vol "$TMP/m$n"; done
done
