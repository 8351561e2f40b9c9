"""sampler.py - PlannedSampler: wraps a PyTorch sampler so that each
epoch's order, drawn before the first batch, is handed to the granary
mount holding the files (plan.py), which then fetches ahead exactly what
the loader reads next. Duck-typed: torch is never imported. A plan that
cannot be made or sent costs a warning, never a training error.
"""
import os
import warnings
import weakref

from .plan import NOT_PLANNABLE, Plan, mount_root


def dataset_paths(data):
    """The file of each index of data: a torchvision DatasetFolder or
    ImageFolder (.samples, .imgs), a torch Subset of one (.dataset and
    .indices), or a sequence of paths."""
    if hasattr(data, "samples"):
        return [os.fsdecode(s[0]) for s in data.samples]
    if hasattr(data, "imgs"):
        return [os.fsdecode(s[0]) for s in data.imgs]
    if hasattr(data, "dataset") and hasattr(data, "indices"):
        inner = dataset_paths(data.dataset)
        return [inner[i] for i in data.indices]
    if isinstance(data, (str, bytes)):
        raise TypeError("a list of paths is wanted, not one path: %r" % (data,))
    return [os.fsdecode(os.fspath(p)) for p in data]


def dataset_root(data):
    """The directory a dataset was read from (.root), or None."""
    while data is not None and not hasattr(data, "root"):
        data = getattr(data, "dataset", None)  # a Subset
    return None if data is None else data.root


def _cancel(plan, pid):
    # the finalizer: only the process that made the plan ends it (a forked
    # loader worker holds a copy of the sampler, not the plan)
    if os.getpid() == pid:
        try:
            plan.cancel()
        except OSError:
            pass


class PlannedSampler:
    """PlannedSampler(sampler, paths_or_dataset, root=None)

    Iterates as sampler does (its indices, or its batches of indices);
    at each iter() it draws the whole epoch first and hands the mount
    the files of those indices in that order. paths_or_dataset maps an
    index to its file (see dataset_paths). The plan is made on the
    directory root: by default the dataset's .root, else the mount point
    of the first path; paths are sent relative to it, and files outside
    it are not planned. One plan per sampler and process, made at the
    first epoch, replaced at each next one, and cancelled by close(),
    when the sampler is collected, or at exit."""

    def __init__(self, sampler, paths_or_dataset, root=None):
        self.sampler = sampler
        self._data = paths_or_dataset
        self._root = root
        self._rel = None  # the path of each index relative to _root
        self._plan = None
        self._pid = 0  # the process that made _plan
        self._finalizer = None
        self._off = False  # no plans here: warned once, then quiet
        self._relative()

    def __len__(self):
        return len(self.sampler)

    @property
    def plan(self):
        """The granary.Plan of this epoch (status() has its figures), or
        None: no epoch yet, or no plans on this mount."""
        return self._plan if self._pid == os.getpid() else None

    def set_epoch(self, epoch):
        """DistributedSampler's: the next epoch's shuffle."""
        self.sampler.set_epoch(epoch)

    def __iter__(self):
        order = list(self.sampler)
        if not self._off:
            try:
                self._send(order)
            except Exception as e:  # never a training error
                self._warn("cannot hand the epoch's order to '%s': %s; "
                           "this epoch reads without a plan" % (self._root, e))
                self._drop()
        return iter(order)

    def close(self):
        """Cancel the plan (the next epoch makes a new one)."""
        if self._finalizer is not None:
            self._finalizer()
        self._plan = self._finalizer = None

    def _warn(self, text):
        warnings.warn("granary: " + text, RuntimeWarning, stacklevel=3)

    def _drop(self):
        # a plan half sent is emptied: better none than a wrong one
        if self._plan is not None and self._pid == os.getpid():
            try:
                self._plan.clear()
            except OSError:
                pass

    def _relative(self):
        # the path of each index relative to the plan's directory
        paths = dataset_paths(self._data)
        if self._root is None:
            self._root = dataset_root(self._data)
        if self._root is None:
            self._root = mount_root(paths[0]) if paths else os.getcwd()
        top = os.path.abspath(os.fsdecode(self._root))
        pre = top.rstrip("/") + "/"
        rel = [None] * len(paths)
        for i, p in enumerate(paths):
            a = os.path.abspath(p)
            if a.startswith(pre):
                rel[i] = a[len(pre):]
        out = rel.count(None)
        if out:
            self._warn("%d of %d files lie outside '%s' and are not planned"
                       % (out, len(rel), top))
        self._rel = rel

    def _paths(self, order):
        for x in order:
            for i in x if isinstance(x, (list, tuple)) else (x,):
                p = self._rel[i]
                if p is not None:
                    yield p

    def _new_plan(self):
        self.close()
        try:
            self._plan = Plan(self._root)
        except OSError as e:
            if e.errno not in NOT_PLANNABLE:
                raise
            self._off = True
            self._warn("no epoch plans on '%s' (%s): not a granary mount, "
                       "or one without plans; reading without them"
                       % (self._root, os.strerror(e.errno)))
            return False
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _cancel, self._plan, self._pid)
        return True

    def _send(self, order):
        if self._plan is None or self._pid != os.getpid():
            if not self._new_plan():
                return
        else:
            try:
                self._plan.clear()
            except FileNotFoundError:  # the mount ended it: a new one
                if not self._new_plan():
                    return
        self._plan.add(self._paths(order))

    def __getstate__(self):
        # a copy (deepcopy, pickle) plans on its own
        state = self.__dict__.copy()
        state.update(_plan=None, _pid=0, _finalizer=None)
        return state
