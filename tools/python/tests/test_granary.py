"""test_granary.py - unit tests of the granary Python module without a
mount: FakeMount answers os.getxattr/os.setxattr as fs/vfs/plan.h says a
mount does, and records what it was sent. The torch cases (DataLoader,
DistributedSampler) run with Debian's python3-torch and are skipped
without it. Run (in tools/python): python3 -m unittest discover -s tests
"""
import errno
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import warnings
from unittest import mock

import granary
from granary.plan import ADD_MAX

try:
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
except ImportError:
    torch = None


def oserror(code, what):
    return OSError(code, os.strerror(code), what)


class FakeMount:
    """The plan calls of one directory of a mount (top); any other path
    answers as a file system without granary.* names (ENOTSUP). plans:
    id -> the list of paths planned; adds: the size of every add."""

    def __init__(self, top, new_errno=0, read_only=False):
        self.top = os.path.abspath(top)
        self.new_errno = new_errno  # what "new" answers, 0: a plan
        self.read_only = read_only  # every set refused, as the kernel does
        self.plans = {}
        self.next_id = 1
        self.adds = []
        self.calls = []
        self.refuse = {}  # path -> errno an add naming it fails with
        self.held = {}  # id -> {position: path} held past the list's end
        self.batches = []  # the paths of every batch get
        self.lock = threading.Lock()  # the get form's adds come from threads

    def _plan(self, path, name):
        if os.path.abspath(path) != self.top:
            raise oserror(errno.ENOTSUP, path)
        self.calls.append(name)
        parts = name.split(".")
        if name.startswith("granary.plan.") and len(parts) >= 3 and parts[2].isdigit():
            pid = int(parts[2])
            if pid not in self.plans:
                raise oserror(errno.ENOENT, path)
            return pid, ".".join(parts[3:])
        return None, name

    def getxattr(self, path, name, *, follow_symlinks=True):
        path = os.fsdecode(path)
        if ((name.endswith(".add") or ".add:" in name) and
                os.path.abspath(path).startswith(self.top + "/")):
            # the get form of an add: on the file itself; add:POS holds a
            # file past the list's end until the files before it come
            with self.lock:
                pid, call = self._plan(self.top, name)
                rel = os.path.relpath(os.path.abspath(path), self.top)
                if rel in self.refuse:
                    raise oserror(self.refuse[rel], path)
                lst, held = self.plans[pid], self.held.setdefault(pid, {})
                pos = int(call[4:]) if call.startswith("add:") else len(lst)
                if pos < len(lst) or pos in held:
                    raise oserror(errno.EEXIST, path)
                held[pos] = rel
                while len(lst) in held:
                    lst.append(held.pop(len(lst)))
                return b"%d" % len(lst)
        pid, call = self._plan(path, name)
        if pid is not None and call.count(":") == 2 and call.startswith("add:"):
            # the batch form on the directory: all or none
            if len(name.encode()) > 255:
                raise oserror(errno.ERANGE, path)
            with self.lock:
                _, pos, paths = call.split(":", 2)
                pos, paths = int(pos), paths.split("\n")
                self.batches.append(len(paths))
                for p in paths:
                    if p in self.refuse:
                        raise oserror(self.refuse[p], path)
                lst, held = self.plans[pid], self.held.setdefault(pid, {})
                if any(pos + k < len(lst) or pos + k in held
                       for k in range(len(paths))):
                    raise oserror(errno.EEXIST, path)
                for k, p in enumerate(paths):
                    held[pos + k] = p
                while len(lst) in held:
                    lst.append(held.pop(len(lst)))
                return b"%d" % len(lst)
        if pid is not None and call in ("clear", "cancel") or call.startswith("owner:"):
            if call == "clear":
                self.plans[pid] = []
                self.held.pop(pid, None)
            elif call == "cancel":
                del self.plans[pid]
                return b"0"
            return b"%d" % len(self.plans[pid])
        if pid is None and call == "granary.plan.new":
            if self.new_errno:
                raise oserror(self.new_errno, path)
            pid, self.next_id = self.next_id, self.next_id + 1
            self.plans[pid] = []
            return b"%d\n" % pid
        if pid is None and call == "granary.plans":
            return json.dumps({"plans": [{"id": i, "files": len(p)}
                                         for i, p in self.plans.items()]}).encode()
        if pid is not None and call == "":
            return json.dumps({"id": pid, "files": len(self.plans[pid]),
                               "place": 0}).encode() + b"\0"
        raise oserror(errno.ENODATA, path)

    def setxattr(self, path, name, value, flags=0, *, follow_symlinks=True):
        if self.read_only:
            raise oserror(errno.EROFS, path)
        pid, call = self._plan(path, name)
        if len(value) > ADD_MAX:
            raise oserror(errno.E2BIG, path)  # the kernel's XATTR_SIZE_MAX
        if pid is None:
            raise oserror(errno.EINVAL, path)
        if call == "add":
            lines = value.decode().split("\n")
            if lines[-1] == "":
                lines.pop()
            for p in lines:
                if (not p or p.startswith("/") or
                        any(c in ("", ".", "..") for c in p.split("/"))):
                    raise oserror(errno.EINVAL, path)
                if p in self.refuse:
                    raise oserror(self.refuse[p], path)
            self.adds.append(len(value))
            self.plans[pid] += lines
        elif call == "clear":
            self.plans[pid] = []
        elif call == "cancel":
            del self.plans[pid]
        elif call == "owner":
            int(value)
        else:
            raise oserror(errno.EINVAL, path)

    def __enter__(self):
        self._patches = [mock.patch.object(os, "getxattr", self.getxattr),
                         mock.patch.object(os, "setxattr", self.setxattr)]
        for p in self._patches:
            p.start()
        return self

    def __exit__(self, *exc):
        for p in self._patches:
            p.stop()


class Folder:
    """What PlannedSampler uses of a torchvision ImageFolder."""

    def __init__(self, root, paths):
        self.root = root
        self.samples = [(os.path.join(root, p), i % 3) for i, p in enumerate(paths)]


def names(n, seed=1):
    """n distinct relative paths of varied lengths."""
    rnd = random.Random(seed)
    return ["class%d/%s-%05d.jpg" % (i % 7, "x" * rnd.randrange(1, 120), i)
            for i in range(n)]


class Shuffled:
    """A sampler: a new permutation of range(n) at each iter."""

    def __init__(self, n, seed=0):
        self.n, self.rnd = n, random.Random(seed)
        self.orders = []

    def __len__(self):
        return self.n

    def __iter__(self):
        order = list(range(self.n))
        self.rnd.shuffle(order)
        self.orders.append(order)
        return iter(order)


class TestImport(unittest.TestCase):
    def test_standard_library_only(self):
        code = ("import sys, granary\n"
                "bad = [m for m in ('torch', 'numpy', 'torchvision') if m in sys.modules]\n"
                "sys.exit('imported: %s' % bad if bad else 0)\n")
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        r = subprocess.run([sys.executable, "-c", code], cwd=top,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


class TestPlan(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_read_only_mount_uses_gets(self):
        paths = names(50)
        with FakeMount(self.dir, read_only=True) as m:
            plan = granary.Plan(self.dir)
            self.assertTrue(plan.gets)
            self.assertEqual(plan.add(paths), len(paths))
            self.assertEqual(m.plans[plan.id], paths)
            self.assertEqual(plan.replace(paths[::-1]), len(paths))
            self.assertEqual(m.plans[plan.id], paths[::-1])
            plan.owner(os.getpid())
            self.assertIn("granary.plan.%d.owner:%d" % (plan.id, os.getpid()), m.calls)
            plan.cancel()
            self.assertNotIn(plan.id, m.plans)
        with FakeMount(self.dir) as m:
            self.assertFalse(granary.Plan(self.dir).gets)

    def test_read_only_gets_by_position_from_threads(self):
        paths = names(500, seed=7)
        with FakeMount(self.dir, read_only=True) as m:
            plan = granary.Plan(self.dir)
            self.assertEqual(plan.add(paths[:300]), 300)
            self.assertEqual(plan.add(paths[300:]), 200)
            self.assertEqual(m.plans[plan.id], paths)
            self.assertTrue(all(".add:" in c for c in m.calls if ".add" in c))
            # batches of several paths, each name within 255 bytes
            self.assertGreater(len(m.batches), 0)
            self.assertLess(len(m.batches), len(paths) // 2)
            self.assertTrue(all(n > 1 for n in m.batches))
            self.assertEqual(plan.replace(paths[::-1]), len(paths))
            self.assertEqual(m.plans[plan.id], paths[::-1])
            # a path refused: the error of the first in order is raised
            plan.clear()
            m.refuse[paths[100]] = errno.EACCES
            m.refuse[paths[400]] = errno.ENOENT
            with self.assertRaises(PermissionError):
                plan.add(paths)
            self.assertEqual(m.plans[plan.id], paths[:100])

    def test_chunks_at_most_64k_in_order(self):
        paths = names(5000)
        with FakeMount(self.dir) as m:
            plan = granary.Plan(self.dir)
            self.assertEqual(plan.add(paths), len(paths))
            self.assertEqual(m.plans[plan.id], paths)
            self.assertGreater(len(m.adds), 3)
            self.assertTrue(all(a <= ADD_MAX for a in m.adds), m.adds)
            # each add but the last is full: the next line did not fit
            self.assertGreater(min(m.adds[:-1]), ADD_MAX - 130)

    def test_chunk_boundary(self):
        line = "d/" + "a" * 1021  # 1024 bytes with its newline
        exact = [line] * 64
        self.assertEqual([len(c) for c in granary.chunks(exact)], [ADD_MAX])
        self.assertEqual([len(c) for c in granary.chunks(exact + ["b"])],
                         [ADD_MAX, 2])
        over = exact[:-1] + [line + "a"]  # one byte more than an add
        self.assertEqual([len(c) for c in granary.chunks(over)],
                         [ADD_MAX - 1024, 1025])
        self.assertEqual(list(granary.chunks([])), [])
        for bad in ("", "a\nb"):
            with self.assertRaises(OSError) as e:
                list(granary.chunks([bad]))
            self.assertEqual(e.exception.errno, errno.EINVAL)

    def test_calls_and_errors(self):
        with FakeMount(self.dir) as m:
            plan = granary.Plan(self.dir)
            plan.add(["a", "b/c"])
            self.assertEqual(plan.status()["files"], 2)
            self.assertEqual([p["id"] for p in granary.plans(self.dir)], [plan.id])
            plan.replace(["z"])
            self.assertEqual(m.plans[plan.id], ["z"])
            m.refuse["secret"] = errno.EACCES
            with self.assertRaises(OSError) as e:
                plan.add(["y", "secret"])
            self.assertEqual(e.exception.errno, errno.EACCES)
            self.assertEqual(m.plans[plan.id], ["z"])  # the add added nothing
            plan.owner(os.getpid())
            plan.cancel()
            self.assertEqual(m.plans, {})
            plan.cancel()  # gone already: no error
            with self.assertRaises(FileNotFoundError):
                plan.status()

    def test_not_a_granary_mount(self):
        # the real file system of a temporary directory: no granary.* names
        with self.assertRaises(OSError) as e:
            granary.Plan(self.dir)
        self.assertIn(e.exception.errno, granary.plan.NOT_PLANNABLE)

    def test_mount_root(self):
        sub = os.path.join(self.dir, "a", "b")
        os.makedirs(sub)
        real = os.path.ismount
        with mock.patch.object(os.path, "ismount",
                               lambda d: d == self.dir or real(d)):
            self.assertEqual(granary.mount_root(os.path.join(sub, "f.png")), self.dir)
            self.assertEqual(granary.mount_root(sub), self.dir)
        self.assertTrue(os.path.ismount(granary.mount_root(sub)))


class TestPlannedSampler(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_order_sent_is_the_samplers(self):
        paths = names(3000)
        ds = Folder(self.dir, paths)
        inner = Shuffled(len(paths))
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler(inner, ds)
            self.assertEqual(len(s), len(paths))
            self.assertIsNone(s.plan)
            got1 = list(s)
            self.assertEqual(got1, inner.orders[0])
            (pid,) = m.plans
            self.assertEqual(s.plan.id, pid)
            self.assertEqual(s.plan.status()["files"], len(paths))
            self.assertEqual(m.plans[pid], [paths[i] for i in got1])
            self.assertGreater(len(m.adds), 1)
            got2 = list(s)  # the next epoch replaces it, on the same plan
            self.assertEqual(got2, inner.orders[1])
            self.assertNotEqual(got1, got2)
            self.assertEqual(list(m.plans), [pid])
            self.assertEqual(m.plans[pid], [paths[i] for i in got2])
            s.close()
            self.assertEqual(m.plans, {})

    def test_list_of_paths_root_and_outside(self):
        paths = [os.path.join(self.dir, p) for p in names(50)]
        paths.append("/elsewhere/f.png")
        with FakeMount(self.dir) as m, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = granary.PlannedSampler(list(range(len(paths))), paths, root=self.dir)
            self.assertEqual(list(s), list(range(len(paths))))
            (plan,) = m.plans.values()
            self.assertEqual(plan, [os.path.relpath(p, self.dir) for p in paths[:-1]])
            self.assertEqual(len(w), 1)
            self.assertIn("1 of 51 files lie outside", str(w[0].message))

    def test_mount_root_of_paths(self):
        # a list of paths, no root: the plan is made at their mount point
        paths = [os.path.join(self.dir, p) for p in names(20)]
        real = os.path.ismount
        with FakeMount(self.dir) as m, mock.patch.object(
                os.path, "ismount", lambda d: d == self.dir or real(d)):
            s = granary.PlannedSampler(range(19, -1, -1), paths)
            self.assertEqual(list(s), list(range(19, -1, -1)))
            self.assertEqual(list(m.plans.values()),
                             [[os.path.relpath(p, self.dir) for p in paths[::-1]]])

    def test_subset_of_a_folder(self):
        class Subset:
            def __init__(self, dataset, indices):
                self.dataset, self.indices = dataset, indices

        paths = names(10)
        sub = Subset(Folder(self.dir, paths), [9, 4, 7])
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler([2, 0, 1], sub)
            self.assertEqual(list(s), [2, 0, 1])
            self.assertEqual(list(m.plans.values()), [[paths[7], paths[9], paths[4]]])
        with self.assertRaises(TypeError):
            granary.PlannedSampler([0], os.path.join(self.dir, "one.png"))
        with self.assertRaises(TypeError):
            granary.PlannedSampler([0], object())

    def test_batches_of_indices(self):
        paths = names(10)
        batches = [[3, 1], [0, 9, 2], [5]]
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler(batches, Folder(self.dir, paths))
            self.assertEqual(list(s), batches)
            self.assertEqual(list(m.plans.values()),
                             [[paths[i] for b in batches for i in b]])

    def test_noop_off_a_granary_mount(self):
        for code in (errno.ENOTSUP, errno.ENODATA):
            with FakeMount(self.dir, new_errno=code) as m, \
                    warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                inner = Shuffled(100)
                s = granary.PlannedSampler(inner, Folder(self.dir, names(100)))
                for epoch in range(3):
                    self.assertEqual(list(s), inner.orders[epoch])
                self.assertEqual(len(w), 1, [str(x.message) for x in w])
                self.assertIn("no epoch plans on", str(w[0].message))
                self.assertEqual(m.calls, ["granary.plan.new"])  # asked once
                self.assertIsNone(s.plan)

    def test_noop_on_a_real_local_directory(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = granary.PlannedSampler([2, 0, 1], Folder(self.dir, ["a", "b", "c"]))
            self.assertEqual(list(s), [2, 0, 1])
            self.assertEqual(list(s), [2, 0, 1])
        self.assertEqual(len(w), 1)

    def test_error_is_a_warning(self):
        paths = names(200)
        with FakeMount(self.dir) as m, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = granary.PlannedSampler(list(range(200)), Folder(self.dir, paths))
            m.refuse[paths[150]] = errno.EACCES
            self.assertEqual(list(s), list(range(200)))
            self.assertEqual(len(w), 1)
            self.assertIn("Permission denied", str(w[0].message))
            self.assertEqual(list(m.plans.values()), [[]])  # emptied, not half
            del m.refuse[paths[150]]
            self.assertEqual(list(s), list(range(200)))  # the next epoch plans
            self.assertEqual(list(m.plans.values()), [paths])

    def test_plan_ended_by_the_mount(self):
        paths = names(30)
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler(list(range(30)), Folder(self.dir, paths))
            list(s)
            (first,) = m.plans
            del m.plans[first]  # idle, or its owner gone
            list(s)
            (second,) = m.plans
            self.assertNotEqual(first, second)
            self.assertEqual(m.plans[second], paths)

    def test_cancelled_when_collected(self):
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler([0, 1], Folder(self.dir, ["a", "b"]))
            list(s)
            self.assertEqual(len(m.plans), 1)
            del s
            gc.collect()
            self.assertEqual(m.plans, {})
            self.assertIn("granary.plan.1.cancel", m.calls)

    def test_copy_plans_on_its_own(self):
        import copy
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler([0, 1], Folder(self.dir, ["a", "b"]))
            list(s)
            c = copy.deepcopy(s)
            list(c)
            self.assertEqual(sorted(m.plans), [1, 2])
            del c
            gc.collect()
            self.assertEqual(sorted(m.plans), [1])


@unittest.skipIf(torch is None, "no torch (Debian: python3-torch)")
class TestTorch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_distributed_sampler_set_epoch(self):
        paths = names(101)
        ds = Folder(self.dir, paths)
        with FakeMount(self.dir) as m:
            ranks = [granary.PlannedSampler(
                DistributedSampler(paths, num_replicas=2, rank=r, seed=7), ds)
                for r in (0, 1)]
            for epoch in (0, 1):
                for r, s in enumerate(ranks):
                    s.set_epoch(epoch)
                    ref = DistributedSampler(paths, num_replicas=2, rank=r, seed=7)
                    ref.set_epoch(epoch)
                    want = list(ref)
                    self.assertEqual(len(s), len(want))
                    self.assertEqual(list(s), want)
                    self.assertEqual(m.plans[r + 1], [paths[i] for i in want])
                # the two ranks' plans cover the dataset (one index padded)
                both = m.plans[1] + m.plans[2]
                self.assertEqual(len(both), 102)
                self.assertEqual(set(both), set(paths))
            self.assertNotEqual(ranks[0].sampler.epoch, 0)

    def test_dataloader_order(self):
        class Items:
            def __init__(self, n):
                self.n = n

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                return i

        paths = names(64)
        g = torch.Generator().manual_seed(3)
        with FakeMount(self.dir) as m:
            s = granary.PlannedSampler(RandomSampler(Items(64), generator=g),
                                       Folder(self.dir, paths))
            loader = DataLoader(Items(64), sampler=s, batch_size=5)
            for _ in range(2):
                read = [int(i) for b in loader for i in b]
                self.assertEqual(sorted(read), list(range(64)))
                self.assertEqual(list(m.plans.values()), [[paths[i] for i in read]])


if __name__ == "__main__":
    unittest.main()
