#!/usr/bin/env python3
"""locks.py - fcntl record locks and a lock-guarded counter, for
t0190-locks.sh (Python reaches F_GETLK and F_SETLKW through fcntl.fcntl).

  locks.py ops FILE OP...   run OPs in order on one fd of FILE (read-write),
                            one output line each:
     w:S:L r:S:L u:S:L      F_SETLK write/read/unlock [S, S+L) (L 0: to
                            EOF): "ok" or the errno's name (EAGAIN)
     W:S:L                  F_SETLKW write lock
     g:S:L                  F_GETLK for a write lock: "none" or
                            "TYPE START LEN PID" (TYPE w or r)
     close2                 open FILE again and close that fd (POSIX: all
                            of this process's locks on FILE go)
     o:S:L                  open FILE again (an open file of its own) and
                            F_OFD_SETLK a write lock on it
     oclose                 close that open file (its OFD locks go)
     touch:PATH, gone:PATH  create PATH; wait until PATH does not exist
  locks.py count flock|lockf LOCKFILE COUNTER N   N times: lock LOCKFILE
                            (fcntl.flock, or fcntl.lockf: a POSIX lock),
                            read COUNTER, write it + 1, fsync, close, unlock
"""
import errno
import fcntl
import os
import struct
import sys
import time

FLOCK = "hhqqi"  # struct flock on Linux: type, whence, start, len, pid


def getlk(fd, start, length):
    arg = struct.pack(FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
    ty, _, s, ln, pid = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, arg))
    if ty == fcntl.F_UNLCK:
        return "none"
    return "%s %d %d %d" % ("w" if ty == fcntl.F_WRLCK else "r", s, ln, pid)


def setlk(fd, cmd, ty, start, length):
    arg = struct.pack(FLOCK, ty, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, cmd, arg)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def ops(path, todo):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    types = {"w": fcntl.F_WRLCK, "r": fcntl.F_RDLCK, "u": fcntl.F_UNLCK}
    ofd = -1
    for op in todo:
        w = op.split(":", 1)
        if op == "close2":
            os.close(os.open(path, os.O_RDONLY))
            out = "ok"
        elif op == "oclose":
            os.close(ofd)
            out = "ok"
        elif w[0] == "o":
            ofd = os.open(path, os.O_RDWR)
            s, ln = (int(x) for x in w[1].split(":"))
            out = setlk(ofd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, s, ln)
        elif w[0] == "touch":
            open(w[1], "w").close()
            out = "ok"
        elif w[0] == "gone":
            while os.path.exists(w[1]):
                time.sleep(0.02)
            out = "ok"
        else:
            s, ln = (int(x) for x in w[1].split(":"))
            if w[0] == "g":
                out = getlk(fd, s, ln)
            elif w[0] == "W":
                out = setlk(fd, fcntl.F_SETLKW, fcntl.F_WRLCK, s, ln)
            else:
                out = setlk(fd, fcntl.F_SETLK, types[w[0]], s, ln)
        print(out, flush=True)


def count(how, lockfile, counter, n):
    lock = fcntl.lockf if how == "lockf" else fcntl.flock
    for _ in range(n):
        with open(lockfile, "a") as lk:
            lock(lk, fcntl.LOCK_EX)
            with open(counter, "r+") as f:
                v = int(f.read() or "0")
                f.seek(0)
                f.truncate()
                f.write("%d\n" % (v + 1))
                f.flush()
                os.fsync(f.fileno())
            lock(lk, fcntl.LOCK_UN)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "ops":
        ops(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 6 and sys.argv[1] == "count":
        count(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
