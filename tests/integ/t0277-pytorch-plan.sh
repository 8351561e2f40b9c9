#!/bin/bash
# t0277-pytorch-plan.sh - granary.PlannedSampler on a real mount (issue
# 34): a DataLoader over a torchvision DatasetFolder on a --read-only
# mount; the mount's plan (granary.plan.ID) lists the epoch's files in the
# sampler's order (its readers' place follows each sample exactly), the
# next epoch replaces it, 4 workers pass every file, two DistributedSampler
# ranks plan apart, close() and the process's end cancel (t0277-plan.py).
# Needs the client's epoch plans (fs/vfs/plan.c): fails without them.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-torch is
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$TOPDIR/tools/python
if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
	skip "no PyTorch for $PY (Debian: python3-torch python3-torchvision)"
	exit 0
fi

new_volume plan
W=$TMP/w R=$TMP/r
mount_vol "$META" "$W"
for c in a b c; do
	mkdir -p "$W/data/$c"
	for i in $(seq -w 1 20); do
		{ echo "$c/$i.bin"; head -c $((10#$i * 997)) /dev/urandom; } >"$W/data/$c/$i.bin"
	done
done
umount_vol "$W"
mount_vol "$META" "$R" --read-only

"$PY" -c 'import granary, sys; granary.Plan(sys.argv[1]).cancel()' "$R/data" \
	>"$TMP/new.out" 2>&1 ||
	fail "this client makes no epoch plans (fs/vfs/plan.c): $(tail -n 1 "$TMP/new.out")"
"$PY" "$TOPDIR/tests/integ/t0277-plan.py" "$R/data" >"$TMP/plan.out" 2>&1 ||
	fail "PlannedSampler on the mount: $(cat "$TMP/plan.out")"
ok "the plan lists each epoch's files in the sampler's order, replaced each epoch"
ok "4 workers pass the whole plan; two ranks plan apart; close() and exit cancel"
