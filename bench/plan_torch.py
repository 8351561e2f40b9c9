#!/usr/bin/python3
"""plan_torch.py ROOT MODE SEED [WORKERS] - one epoch of a PyTorch
DataLoader over a DatasetFolder of .bin files (CLASS/NAME.bin) on a
granary mount, for bench/plan.sh (issue 34). MODE "random": a plain
RandomSampler; "plan": the same RandomSampler (same seed, so the same
order) wrapped in granary.PlannedSampler, which hands the mount the
epoch's order before the first batch. The loader reads each file's raw
bytes (no decode), WORKERS workers (default 4), batches of 32.

Prints one line: files= bytes= secs= files_per_s= mib_per_s=, and with
MODE "plan" the plan's figures at the end of the epoch (plan_ready=
plan_waited= plan_prefetched= plan_used= plan_wasted= plan_window=).
The time runs from the loader's first iteration (the plan is sent there)
to its last batch; importing torch and listing the dataset are not in it.
A warning from granary is an error (exit 1).
"""
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tools", "python"))

import torch  # noqa: E402
from torch.utils.data import DataLoader, RandomSampler  # noqa: E402
from torchvision.datasets import DatasetFolder  # noqa: E402

import granary  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def sizes(batch):
    # what the training step gets: the bytes were read in the worker
    return sum(len(data) for data, _ in batch), len(batch)


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[2] not in ("random", "plan"):
        print(__doc__, file=sys.stderr)
        return 2
    root, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) == 5 else 4
    warnings.simplefilter("error", RuntimeWarning)
    ds = DatasetFolder(root, loader=read_bytes, extensions=(".bin",))
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(seed))
    if mode == "plan":
        sampler = granary.PlannedSampler(sampler, ds)
    loader = DataLoader(ds, sampler=sampler, batch_size=32,
                        num_workers=workers, collate_fn=sizes)
    t0 = time.monotonic()
    nbytes = nfiles = 0
    for b, n in loader:
        nbytes += b
        nfiles += n
    secs = time.monotonic() - t0
    line = "files=%d bytes=%d secs=%.3f files_per_s=%.1f mib_per_s=%.1f" % (
        nfiles, nbytes, secs, nfiles / secs, nbytes / 1048576 / secs)
    if mode == "plan":
        st = sampler.plan.status()
        line += "".join(" plan_%s=%s" % (k, st.get(k)) for k in (
            "ready", "waited", "prefetched", "used", "wasted", "window"))
        sampler.close()
    print(line)
    if nfiles != len(ds):
        print("plan_torch: read %d of %d files" % (nfiles, len(ds)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
