#!/usr/bin/python3
"""t0276-checkpoint.py A B LOCAL - the rounds of t0276-pytorch-checkpoint.sh
(one process: torch takes seconds to import). A and B are two mounts of
one volume, LOCAL a local directory. Round SEED (1, then 2): a checkpoint
of a small model trained one step (its state_dict, about 4 MiB, with
Adam's state, 12 MiB in all) made from SEED is torch.save'd to A/model.pt
and LOCAL/model.pt as a job does it (to model.pt.tmp, renamed over
model.pt); B/model.pt must then be LOCAL's bytes (md5) and torch.load to
every tensor (dtype, shape, values) and value saved; in round 2, none of
round 1's bytes. One line per round on stdout; per problem on stderr, exit 1
if any.
"""
import hashlib
import os
import sys

import torch
from torch import nn


def checkpoint(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(8), nn.Flatten(),
                          nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.Adam(model.parameters())
    loss = model(torch.randn(4, 3, 16, 16)).square().mean()
    loss.backward()
    opt.step()  # Adam's moments, BatchNorm's running figures
    return {"model": model.state_dict(), "optim": opt.state_dict(),
            "epoch": seed, "note": "t0276 seed %d" % seed}


def compare(got, want, where, problems):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            problems.append("%s: %r is no tensor" % (where, type(got)))
        elif got.dtype != want.dtype or got.shape != want.shape:
            problems.append("%s: %s %s, saved %s %s" % (where, got.dtype, tuple(got.shape),
                                                      want.dtype, tuple(want.shape)))
        elif not torch.equal(got, want):
            problems.append("%s: other values than saved" % where)
    elif isinstance(want, dict):
        if not isinstance(got, dict) or sorted(map(str, got)) != sorted(map(str, want)):
            problems.append("%s: keys %s, saved %s" % (where, list(got), list(want)))
        else:
            for k in want:
                compare(got[k], want[k], "%s.%s" % (where, k), problems)
    elif isinstance(want, (list, tuple)):
        if len(got) != len(want):
            problems.append("%s: %d items, saved %d" % (where, len(got), len(want)))
        for k, (g, w) in enumerate(zip(got, want)):
            compare(g, w, "%s[%d]" % (where, k), problems)
    elif got != want:
        problems.append("%s: %r, saved %r" % (where, got, want))


def md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def save(ckpt, path):
    torch.save(ckpt, path + ".tmp")
    os.replace(path + ".tmp", path)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    a, b, local = (os.path.join(d, "model.pt") for d in argv)
    problems = []
    old = None
    for seed in (1, 2):
        ckpt = checkpoint(seed)
        # torch.save names its records after the file: one base name for
        # both, the same bytes
        save(ckpt, a)
        save(ckpt, local)
        for path in (a, b):
            if md5(path) != md5(local):
                problems.append("round %d: %s holds other bytes than saved" % (seed, path))
        got = torch.load(b, map_location="cpu")
        compare(got, ckpt, "round %d: checkpoint" % seed, problems)
        if md5(local) == old:
            problems.append("round %d: the same bytes as round 1 (no test)" % seed)
        old = md5(local)
        n = sum(t.numel() for t in ckpt["model"].values())
        print("round %d: %d bytes, %d tensors, %d values in the model"
              % (seed, os.path.getsize(local), len(ckpt["model"]), n))
    for p in problems[:20]:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
