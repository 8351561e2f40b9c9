#!/usr/bin/python3
"""t0277-plan.py DIR - granary.PlannedSampler on a real mount (the half of
t0277-pytorch-plan.sh that runs torch). DIR holds a DatasetFolder of .bin
files (CLASS/NAME.bin, each file's bytes start with "CLASS/NAME\\n").

  epoch 1 and 2 (a DataLoader without workers: one open per sample): the
  mount's plan ("granary.plan.ID") lists every file, owned by this
  process; after the k-th sample its place is k, which holds only if the
  plan's order is the sampler's; epoch 2 (a new shuffle) replaces the list
  on the same plan (place 1 after its first sample);
  epoch 3, a DataLoader with 4 workers: the plan lists every file again,
  and the readers pass them all (place = files at the end);
  DistributedSampler: two ranks (two samplers of one process here) have a
  plan each, half of the files each, both listed in "granary.plans";
  close() cancels a plan (its status: ENOENT), and a process that ends
  without close leaves no plan behind.
No warning may be given. One line per problem on stderr, exit 1 if any.
"""
import os
import subprocess
import sys
import warnings

import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
from torchvision.datasets import DatasetFolder

import granary


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Indexed:
    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        data, label = self.ds[i]
        return i, data, label


def as_list(batch):
    return batch


def dataset(top):
    return DatasetFolder(top, loader=read_bytes, extensions=(".bin",))


def main(top):
    ds = dataset(top)
    n = len(ds)
    problems = []

    def check(what, st, **want):
        got = {k: st.get(k) for k in want}
        if got != want:
            problems.append("%s: the plan says %s, wanted %s" % (what, got, want))

    def sample_ok(epoch, i, data):
        rel = os.path.relpath(ds.samples[i][0], top)
        if not data.startswith(rel.encode() + b"\n"):
            problems.append("epoch %d: %s reads as %r..." % (epoch, rel, data[:40]))

    sampler = granary.PlannedSampler(
        RandomSampler(ds, generator=torch.Generator().manual_seed(7)), ds)
    one = DataLoader(Indexed(ds), sampler=sampler, batch_size=1,
                     collate_fn=as_list)
    orders, plan_id = [], None
    for epoch in (1, 2):
        order = []
        # the plan is sent at the first batch (BatchSampler draws lazily)
        for k, ((i, data, _),) in enumerate(one, 1):
            order.append(i)
            sample_ok(epoch, i, data)
            plan = sampler.plan
            if plan is None:
                problems.append("epoch %d: no plan made on %s" % (epoch, top))
                return problems
            if k == 1:
                if plan_id is not None and plan.id != plan_id:
                    problems.append("epoch 2 made plan %d instead of replacing %d"
                                    % (plan.id, plan_id))
                plan_id = plan.id
                check("epoch %d, after its first sample" % epoch, plan.status(),
                      id=plan.id, files=n, place=1, pid=os.getpid())
            else:
                check("epoch %d, after sample %d" % (epoch, k), plan.status(), place=k)
        orders.append(order)
        if sorted(order) != list(range(n)):
            problems.append("epoch %d read %d samples, %d distinct, of %d"
                            % (epoch, len(order), len(set(order)), n))
    if orders[0] == orders[1]:
        problems.append("the two epochs have one order (the test cannot tell)")

    four = DataLoader(Indexed(ds), sampler=sampler, batch_size=4, num_workers=4,
                      collate_fn=as_list)
    seen = []
    for batch in four:
        for i, data, _ in batch:
            seen.append(i)
            sample_ok(3, i, data)
    if sorted(seen) != list(range(n)):
        problems.append("epoch 3 read %d samples, %d distinct, of %d"
                        % (len(seen), len(set(seen)), n))
    check("epoch 3 (4 workers), at its end", sampler.plan.status(),
          id=plan_id, files=n, place=n)

    ranks = [granary.PlannedSampler(DistributedSampler(ds, num_replicas=2, rank=r,
                                                       shuffle=True, seed=3), ds)
             for r in (0, 1)]
    for r in ranks:
        r.set_epoch(1)
        iter(r)
    ids = sorted(r.plan.id for r in ranks)
    for r in ranks:
        check("rank's plan", r.plan.status(), files=(n + 1) // 2, place=0)
    listed = sorted(p["id"] for p in granary.plans(top))
    if listed != sorted([plan_id] + ids):
        problems.append("granary.plans lists %s, this process made %s"
                        % (listed, sorted([plan_id] + ids)))

    for s in [sampler] + ranks:
        plan = s.plan
        s.close()
        try:
            plan.status()
            problems.append("plan %d is still there after close()" % plan.id)
        except FileNotFoundError:
            pass

    # a process that ends without close(): its plan is gone after it
    code = ("import sys, granary, os\n"
            "s = granary.PlannedSampler(range(4), sorted(sys.argv[2:]), root=sys.argv[1])\n"
            "iter(s)\n"
            "print(s.plan.id)\n")
    paths = [s[0] for s in ds.samples[:4]]
    r = subprocess.run([sys.executable, "-c", code, top] + paths,
                       capture_output=True, text=True)
    if r.returncode != 0:
        problems.append("a planning process failed: %s" % r.stderr)
    else:
        left = [p["id"] for p in granary.plans(top)]
        if left:
            problems.append("plans %s left after their process ended (made %s)"
                            % (left, r.stdout.strip()))
    return problems


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", "This DataLoader will create")  # 2 cores
        problems = main(sys.argv[1])
    problems += ["warning: %s" % w.message for w in warned]
    for p in problems[:20]:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)
