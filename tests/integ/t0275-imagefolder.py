#!/usr/bin/python3
"""t0275-imagefolder.py - the two halves of t0275-pytorch-imagefolder.sh.

  gen DIR EXPECTED   write an ImageFolder of random RGB images into DIR (4
                     classes, 50 images each, PNG and JPEG of varied sizes)
                     with PIL, and in EXPECTED (JSON) what each holds: its
                     class, the sum and shape of its decoded pixels
  check DIR EXPECTED read DIR as torchvision's ImageFolder through a
                     DataLoader with 4 workers over a granary.PlannedSampler,
                     two epochs: every sample decoded and held to EXPECTED,
                     each once per epoch; prints a line on what the plan did
One line per problem on stderr, exit 1 if any.
"""
import io
import json
import os
import random
import sys
import warnings

CLASSES = ["cat", "dog", "fish", "owl"]
PER_CLASS = 50


def gen(top, expected_file):
    from PIL import Image

    rnd = random.Random(275)
    want = {}
    for c in CLASSES:
        os.makedirs(os.path.join(top, c))
        for k in range(PER_CLASS):
            w, h = rnd.randrange(8, 96), rnd.randrange(8, 96)
            img = Image.frombytes("RGB", (w, h), rnd.randbytes(w * h * 3))
            fmt = "PNG" if k % 2 else "JPEG"
            buf = io.BytesIO()
            img.save(buf, fmt, quality=90)
            data = buf.getvalue()
            # what a decoder makes of the bytes written (JPEG is lossy)
            px = Image.open(io.BytesIO(data)).convert("RGB")
            rel = "%s/%03d.%s" % (c, k, "png" if fmt == "PNG" else "jpg")
            with open(os.path.join(top, rel), "wb") as f:
                f.write(data)
            want[rel] = {"class": c, "sum": sum(px.tobytes()), "shape": [3, h, w]}
    with open(expected_file, "w") as f:
        json.dump(want, f)


class Indexed:
    """The dataset's samples with their index (to find their file)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        img, label = self.ds[i]
        return i, img, label


def as_list(batch):
    return batch  # the images differ in size: no stacking


def check(top, expected_file):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    from torchvision import datasets, transforms

    import granary

    with open(expected_file) as f:
        want = json.load(f)
    ds = datasets.ImageFolder(top, transform=transforms.PILToTensor())
    problems = []
    if ds.classes != CLASSES or len(ds) != len(want):
        problems.append("ImageFolder sees classes %s and %d samples, wrote %s and %d"
                        % (ds.classes, len(ds), CLASSES, len(want)))
    sampler = granary.PlannedSampler(
        RandomSampler(ds, generator=torch.Generator().manual_seed(5)), ds)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", "This DataLoader will create")  # 2 cores
        loader = DataLoader(Indexed(ds), sampler=sampler, batch_size=8, num_workers=4,
                            collate_fn=as_list)
        for epoch in (1, 2):
            seen = []
            for batch in loader:
                for i, img, label in batch:
                    rel = os.path.relpath(ds.samples[i][0], top)
                    w = want[rel]
                    seen.append(i)
                    got = (ds.classes[label], list(img.shape), int(img.sum(dtype=torch.int64)))
                    if got != (w["class"], w["shape"], w["sum"]):
                        problems.append("epoch %d: %s reads as (class, shape, sum) %s, "
                                        "wrote %s" % (epoch, rel, got,
                                                      (w["class"], w["shape"], w["sum"])))
            if sorted(seen) != list(range(len(ds))):
                problems.append("epoch %d: %d samples read, %d distinct, of %d"
                                % (epoch, len(seen), len(set(seen)), len(ds)))
    texts = [str(w.message) for w in warned if str(w.message).startswith("granary:")]
    if sampler.plan is not None:
        st = sampler.plan.status()
        print("plan %d: %d files, place %d" % (sampler.plan.id, st["files"], st["place"]))
        if texts:
            problems.append("warnings with a plan: %s" % texts)
    else:
        print("no plan: %s" % texts)
        if len(texts) != 1 or "no epoch plans on" not in texts[0]:
            problems.append("without a plan, warnings %s (one 'no epoch plans' wanted)" % texts)
    sampler.close()
    for p in problems[:20]:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("gen", "check"):
        sys.exit(__doc__)
    sys.exit(gen(sys.argv[2], sys.argv[3]) if sys.argv[1] == "gen" else
             check(sys.argv[2], sys.argv[3]))
