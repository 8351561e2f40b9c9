"""plan.py - the client side of granary's epoch plans: a job hands the
mount the ordered list of files it will read, through the granary.plan.*
control xattrs of a directory of the mount (fs/vfs/plan.h has the
protocol). Standard library only; every call is one getxattr or setxattr,
and its errors are the OSError (with the mount's errno) that call raised.
"""
import errno
import json
import os
import threading
import time

ADD_MAX = 64 << 10  # bytes of one add (PLAN_ADD_MAX, the kernel's XATTR_SIZE_MAX)
GET_THREADS = 8  # the get form's adds made at once (each waits on the mount)
XATTR_NAME_MAX = 255  # bytes of an xattr name: what one batch get carries

# what a file system that is no granary mount (or a granary without plans:
# an older client, a mount without a disk cache) answers to "granary.plan.new"
NOT_PLANNABLE = frozenset({errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA})


def mount_root(path):
    """The mount point below which path lies: its first ancestor (or
    itself) that os.path.ismount says is one; "/" at worst."""
    d = os.path.abspath(path)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while not os.path.ismount(d):
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    return d


def _text(value):
    """An xattr's value as text (the mount may pad it with NULs or end it
    with a newline)."""
    return value.decode("utf-8", "replace").strip("\0 \n")


def _line(path):
    p = os.fsencode(path)
    if not p or b"\n" in p:
        raise OSError(errno.EINVAL, "a planned path is empty or holds a newline",
                      os.fsdecode(p))
    return p


def _batchable(path):
    """May path (bytes) go in a batch get: names with single '/' between
    them, no "." or ".." (the mount resolves a batch as an add by a set)."""
    return all(c not in (b"", b".", b"..") for c in path.split(b"/"))


def _batches(paths, room):
    """paths (bytes) cut into (first, count) batches of files in a row
    whose names, a newline between them, fit in room bytes; a path that
    cannot go in one is a batch alone."""
    out, used = [], room
    for i, p in enumerate(paths):
        size = len(p) + 1
        if not _batchable(p) or size > room:
            out.append((i, 1))
            used = room  # nothing joins it
        elif out and used + size <= room:
            out[-1] = (out[-1][0], out[-1][1] + 1)
            used += size
        else:
            out.append((i, 1))
            used = size
    return out


def chunks(paths, limit=ADD_MAX):
    """Split paths (str or bytes, relative to the plan's directory) into
    add values of at most limit bytes, "PATH\\n" each, in order."""
    buf, size = [], 0
    for path in paths:
        line = _line(path) + b"\n"
        if size + len(line) > limit and buf:
            yield b"".join(buf)
            buf, size = [], 0
        if len(line) > limit:
            raise OSError(errno.EINVAL, "a planned path is longer than an add",
                          os.fsdecode(line[:-1]))
        buf.append(line)
        size += len(line)
    if buf:
        yield b"".join(buf)


def plans(directory):
    """Every plan of the mount that the caller may see, as dicts (the
    JSON of "granary.plans")."""
    return json.loads(_text(os.getxattr(directory, "granary.plans")))["plans"]


class Plan:
    """A plan of the mount serving directory, made at once ("granary.plan.new")
    and owned by this process: the mount ends it when the process is gone.
    Paths given to add and replace are relative to directory."""

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self.id = int(_text(os.getxattr(self.directory, "granary.plan.new")))
        self._n = 0  # files in the list (the get form's next position)
        # Sets where the mount takes them; else the get forms of the same
        # calls (fs/vfs/plan.h): the kernel refuses every set on a
        # --read-only mount (EROFS), and a set needs write permission on
        # the directory (EACCES). A clear of the new, empty plan finds out.
        self.gets = False
        try:
            os.setxattr(self.directory, self._name("clear"), b"")
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            self.gets = True

    def _call(self, call, arg=None):
        """clear, cancel or owner (arg: its value), as a set or a get."""
        if not self.gets:
            value = b"" if arg is None else str(arg).encode()
            os.setxattr(self.directory, self._name(call), value)
        elif arg is None:
            os.getxattr(self.directory, self._name(call))
        else:
            os.getxattr(self.directory, self._name(call) + ":" + str(arg))

    def _name(self, call=None):
        name = "granary.plan.%d" % self.id
        return name + "." + call if call else name

    def add(self, paths):
        """Append paths in order, in adds of at most ADD_MAX bytes; returns
        how many. An add that fails adds none of its paths (the earlier
        adds stay). Where sets are refused (a --read-only mount), the adds
        are gets (_add_gets), GET_THREADS at once, each of a batch of
        paths or of one file at its position in the list; there a failed
        add leaves the paths before the failing one planned, and may
        leave some after it held by the mount: clear the plan before
        adding again."""
        n = 0
        if self.gets:
            return self._add_gets([_line(p) for p in paths])
        for value in chunks(paths):
            os.setxattr(self.directory, self._name("add"), value)
            n += value.count(b"\n")
            self._n += value.count(b"\n")
        return n

    def _add_gets(self, paths):
        """The gets of an add, from GET_THREADS threads taking batches of
        the paths in order: a batch is one get on the directory of
        "add:POS:PATHS" (as many paths as one xattr name holds), a path
        that cannot go in one, or a batch the mount refuses (a symbolic
        link, an older mount), a get of "add:POS" on each file. The mount
        appends them in position order."""
        base, first = os.fsencode(self.directory), self._n
        head = self._name("add")
        batches = _batches(paths, XATTR_NAME_MAX - len(head.encode()) - 24)
        lock = threading.Lock()
        state = {"next": 0, "bad": len(paths), "err": None}

        def get(path, name):
            while True:
                try:
                    os.getxattr(path, name)
                    return None
                except OSError as e:
                    # EAGAIN: too far past files not yet added (a thread
                    # slow on one): they come, unless one failed
                    if e.errno == errno.EAGAIN and state["err"] is None:
                        time.sleep(0.001)
                        continue
                    return e

        def work():
            while True:
                with lock:
                    k = state["next"]
                    if k >= len(batches) or state["err"] is not None:
                        return
                    state["next"] = k + 1
                i, n = batches[k]
                if n > 1 and get(base, "%s:%d:%s" % (
                        head, first + i,
                        os.fsdecode(b"\n".join(paths[i:i + n])))) is None:
                    continue
                for j in range(i, i + n):  # one at a time
                    e = get(os.path.join(base, paths[j]),
                            "%s:%d" % (head, first + j))
                    if e is not None:
                        with lock:
                            if j < state["bad"]:
                                state["bad"], state["err"] = j, e
                        return

        threads = [threading.Thread(target=work, daemon=True)
                   for _ in range(min(GET_THREADS, len(batches)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if state["err"] is not None:
            self._n = first + state["bad"]
            raise state["err"]
        self._n = first + len(paths)
        return len(paths)

    def clear(self):
        """Empty the list; the readers' place goes back to its start."""
        self._call("clear")
        self._n = 0

    def replace(self, paths):
        """The next epoch's order: clear, then add paths."""
        self.clear()
        return self.add(paths)

    def owner(self, pid):
        """The plan lives as long as process pid instead of its maker."""
        self._call("owner", int(pid))

    def cancel(self):
        """End the plan. A plan already gone (ENOENT) is no error."""
        try:
            self._call("cancel")
        except FileNotFoundError:
            pass

    def status(self):
        """The plan's figures, a dict of the JSON of "granary.plan.ID":
        files, place, window, ahead, prefetched, used, wasted, ..."""
        return json.loads(_text(os.getxattr(self.directory, self._name())))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()

    def __repr__(self):
        return "granary.Plan(%r, id=%d)" % (self.directory, self.id)
