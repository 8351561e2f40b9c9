#!/bin/bash
# t0276-pytorch-checkpoint.sh - torch.save of a model's state on one mount,
# torch.load on another mount of the same volume (issue 34): the file is
# byte for byte what torch.save wrote on a local disk (md5), and every
# tensor loads equal; a new checkpoint saved over it the way jobs do
# (PATH.tmp renamed over PATH) is what the other mount's next load reads
# (t0276-checkpoint.py).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-torch is
HELPER=$TOPDIR/tests/integ/t0276-checkpoint.py
export PYTHONDONTWRITEBYTECODE=1
if ! "$PY" -c 'import torch' 2>/dev/null; then
	skip "no PyTorch for $PY (Debian: python3-torch)"
	exit 0
fi

new_volume ckpt
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"
mkdir "$TMP/local" "$A/ckpt"

"$PY" "$HELPER" "$A/ckpt" "$B/ckpt" "$TMP/local" >"$TMP/rounds.out" 2>&1 ||
	fail "checkpoints saved on A and loaded on B: $(cat "$TMP/rounds.out")"
sed 's/^/  (/; s/$/)/' "$TMP/rounds.out"
size=$(stat -c %s "$TMP/local/model.pt")
[ "$size" -gt $((8 << 20)) ] || fail "the checkpoint is only $size bytes"
check_eq "$(md5sum <"$B/ckpt/model.pt")" "$(md5sum <"$TMP/local/model.pt")" \
	"md5 of the last checkpoint on the other mount"
ok "torch.save on one mount, torch.load on another: byte-exact, every tensor equal"
ok "a checkpoint saved over it (tmp file renamed) is what the other mount loads next"
