#!/bin/bash
# t0275-pytorch-imagefolder.sh - PyTorch reads an ImageFolder from a
# --read-only mount (issue 34): the granary Python module installs with
# pip; 200 PNG and JPEG images made with PIL are written through one mount;
# a DataLoader with 4 workers over a granary.PlannedSampler reads them from
# a read-only mount of the volume, two epochs, each sample decoded and held
# to what was written (class, shape, pixel sum). A mount without plans
# costs one warning, never a failed epoch (t0275-imagefolder.py).
. "$(dirname "$0")/lib.sh"

# Debian's python3, where python3-torch is (tools/install-deps.sh)
PY=/usr/bin/python3
HELPER=$TOPDIR/tests/integ/t0275-imagefolder.py
export PYTHONDONTWRITEBYTECODE=1
if ! "$PY" -c 'import torch, torchvision, PIL' 2>/dev/null; then
	skip "no PyTorch for $PY (Debian: python3-torch python3-torchvision)"
	exit 0
fi

# installed as a user would, from a copy (pip builds in the source tree)
cp -r "$TOPDIR/tools/python" "$TMP/pysrc"
"$PY" -m pip install --quiet --no-build-isolation --no-deps --no-index \
	--target "$TMP/site" "$TMP/pysrc" >"$TMP/pip.out" 2>&1 ||
	fail "pip install of tools/python failed: $(cat "$TMP/pip.out")"
export PYTHONPATH=$TMP/site
check_eq "$(cd "$TMP" && "$PY" -c 'import granary; print(granary.__file__)')" \
	"$TMP/site/granary/__init__.py" "the module imported"
ok "pip installs the granary module"

new_volume imgs
W=$TMP/w R=$TMP/r
mount_vol "$META" "$W"
"$PY" "$HELPER" gen "$W/train" "$TMP/expected.json" ||
	fail "cannot write the images through the mount"
check_eq "$(find "$W/train" -type f | wc -l)" 200 "images written"
umount_vol "$W"
ok "200 images written with PIL through a mount"

mount_vol "$META" "$R" --read-only
"$PY" "$HELPER" check "$R/train" "$TMP/expected.json" >"$TMP/check.out" 2>&1 ||
	fail "the DataLoader's samples: $(cat "$TMP/check.out")"
echo "  ($(head -n 1 "$TMP/check.out"))"
ok "a DataLoader with 4 workers reads every image of a read-only mount right, two epochs"

