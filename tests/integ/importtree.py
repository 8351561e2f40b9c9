#!/usr/bin/env python3
"""importtree.py - the trees of the granary import tests (t0280-t0284).

  importtree.py make DIR SMALL [BIG_MIB] [SEED]
      a tree under DIR: nested directories, SMALL small files (1 KiB to
      200 KiB), empty files, files of odd names (spaces, UTF-8, a tab, a
      newline, a leading dash, a backslash, a name like the import's
      temporary names but not one), two big files of BIG_MIB MiB and
      BIG_MIB MiB + 12345 bytes (default 9), a symlink to a file, one to a
      directory, a dangling one, a FIFO; prints "small=N big=N" (the
      regular files on each side of 1 MiB, empty ones not counted).
  importtree.py cmp [--bytes-only] SRC DST
      DST holds what an import of SRC must give: the same directories,
      regular files with the same bytes (MD5), size, mtime (to the
      nanosecond) and mode bits, symlinks with the same target; no FIFO,
      nothing else (no temporary name). --bytes-only: mtimes and modes
      not compared (an S3 source has neither). Prints each difference (at
      most 20) and exits 1 on any; prints "same: N files" otherwise.
  importtree.py s3put PORT BUCKET PREFIX DIR
      put every regular file below DIR into the lenient s3rver on
      127.0.0.1:PORT (any V4 signature taken) as the object
      PREFIX/<path>, and a marker object PREFIX/<path>/ for each empty
      directory; one connection.
  importtree.py s3key PORT BUCKET KEY TEXT
      put one object KEY (any key: "a//b" too) holding TEXT.
  importtree.py partial SRC DST
      DST holds part of an import of SRC that was killed: each file there
      under a name of the source is whole (bytes, size, mtime, mode as in
      SRC); prints "whole=N temps=M" (M: temporary names of the import)
      and exits 1 on a file that is not whole.
  importtree.py count DIR
      prints the number of regular files below DIR.
"""
import hashlib
import http.client
import os
import random
import stat
import sys
import time
import urllib.parse


def make(root, small, big_mib=9, seed=1):
    rnd = random.Random(seed)
    dirs = ["", "a", "a/b", "a/b/c", "d e", "ünï/名前", "deep/1/2/3/4/5/6"]
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    n_small = 0
    for i in range(small):
        d = dirs[i % len(dirs)]
        size = rnd.randint(1024, 200 * 1024)
        with open(os.path.join(root, d, "f%05d.bin" % i), "wb") as f:
            f.write(rnd.randbytes(size))
        n_small += 1
    for name in ["empty", "a/empty2", "d e/empty 3"]:
        open(os.path.join(root, name), "wb").close()
    odd = ["sp ace.txt", "ünïcødé-名前.jpg", "tab\tname", "new\nline",
           "-dash", "back\\slash", ".hidden", ".granary-import.notatemp",
           "a/b/'quote\"s", "x" * 200]
    for name in odd:
        with open(os.path.join(root, name), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(10, 5000)))
        n_small += 1
    big = [big_mib << 20, (big_mib << 20) + 12345]
    for i, size in enumerate(big):
        with open(os.path.join(root, "a", "big%d.bin" % i), "wb") as f:
            f.write(rnd.randbytes(size))
    os.symlink("../sp ace.txt", os.path.join(root, "a", "link-to-file"))
    os.symlink("b/c", os.path.join(root, "a", "link-to-dir"))
    os.symlink("/nonexistent/target", os.path.join(root, "dangling"))
    os.mkfifo(os.path.join(root, "a", "fifo"))
    os.chmod(os.path.join(root, "sp ace.txt"), 0o600)
    os.chmod(os.path.join(root, "-dash"), 0o755)
    # mtimes with nanoseconds, some in the past
    for i, name in enumerate(["sp ace.txt", "-dash", "a/big0.bin"]):
        t = 1_500_000_000_123_456_789 + i * 1_000_000_007
        os.utime(os.path.join(root, name), ns=(t, t))
    print("small=%d big=%d" % (n_small, len(big)))


def put(c, path, body):
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    hdr = {"Authorization": "AWS4-HMAC-SHA256 Credential=S3RVER/%s/"
           "us-east-1/s3/aws4_request, SignedHeaders=host;"
           "x-amz-date, Signature=00" % now[:8],
           "x-amz-date": now,
           "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
    c.request("PUT", urllib.parse.quote(path), body=body, headers=hdr)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.stderr.write("PUT %r: HTTP %d\n" % (path, r.status))
        return 1
    return 0


def s3put(port, bucket, prefix, root):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    for d, dnames, fnames in os.walk(root):
        keys = []
        if not dnames and not fnames and d != root:
            keys.append((os.path.relpath(d, root) + "/", b""))
        for f in fnames:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    keys.append((os.path.relpath(p, root), fh.read()))
        for rel, body in keys:
            if put(c, "/%s/%s/%s" % (bucket, prefix, rel), body):
                return 1
            n += 1
    print("put %d objects" % n)
    return 0


def walk(root):
    out = {}
    for d, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.md5()
                with open(p, "rb") as f:
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
                out[rel] = ("file", h.hexdigest(), st.st_size,
                            st.st_mtime_ns, stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("special",)
    return out


def cmp(src, dst, bytes_only=False):
    a = {k: v for k, v in walk(src).items() if v[0] != "special"}
    b = walk(dst)
    if bytes_only:
        a = {k: v[:3] for k, v in a.items()}
        b = {k: v[:3] for k, v in b.items()}
    bad = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            bad.append("missing in the copy: %r" % k)
        elif k not in a:
            bad.append("not in the source: %r %s" % (k, b[k][0]))
        elif a[k] != b[k]:
            bad.append("differs: %r: source %s, copy %s" % (k, a[k], b[k]))
    for line in bad[:20]:
        print(line)
    if bad:
        print("%d differences" % len(bad))
        return 1
    print("same: %d files" % sum(1 for v in a.values() if v[0] == "file"))
    return 0


def partial(src, dst):
    a = walk(src)
    b = walk(dst)
    whole = temps = bad = 0
    for k, v in sorted(b.items()):
        name = os.path.basename(k)
        if name.startswith(".granary-import.") and k not in a:
            temps += 1
        elif v[0] != "file":
            continue
        elif a.get(k) != v:
            print("not whole: %r: source %s, copy %s" % (k, a.get(k), v))
            bad += 1
        else:
            whole += 1
    print("whole=%d temps=%d" % (whole, temps))
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]),
             int(sys.argv[4]) if len(sys.argv) > 4 else 9,
             int(sys.argv[5]) if len(sys.argv) > 5 else 1)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "cmp":
        return cmp(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1:3] == ["cmp", "--bytes-only"]:
        return cmp(sys.argv[3], sys.argv[4], True)
    if len(sys.argv) == 6 and sys.argv[1] == "s3key":
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[2]))
        return put(c, "/%s/%s" % (sys.argv[3], sys.argv[4]),
                   sys.argv[5].encode())
    if len(sys.argv) == 6 and sys.argv[1] == "s3put":
        return s3put(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    if len(sys.argv) == 4 and sys.argv[1] == "partial":
        return partial(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "count":
        print(sum(1 for v in walk(sys.argv[2]).values() if v[0] == "file"))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
