#!/usr/bin/env python3
"""t0262-slowproxy.py SLOWPROXY TMPDIR - the HTTP framing of bench/slowproxy
against a server of this script's own that answers each kind of message
HTTP/1.1 allows (Content-Length, chunked with extensions and trailers,
HEAD, 204, 304 with a length, 100 Continue, a body until close), requests
pipelined on one keep-alive connection and sent byte by byte: every byte
arrives unchanged both ways, the proxy logs each request once with its
status and body sizes, counts them (SIGUSR1), holds each first byte for
the delay, keeps the caps (lower bounds only), waits at --max-conns, and
exits 0 on SIGTERM. Prints "ok - ..." lines; exits 1 on the first failure.
"""
import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PROXY, TMP = sys.argv[1], sys.argv[2]
DELAY_MS = 60


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok - " + msg, flush=True)


PATTERN = bytes((i * 7 + 3) % 251 for i in range(251)) * 8000


def body_of(n):
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


# ---------------------------------------------------------------------------
# the server: answers by path; records every byte it got and sent


class Reader:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def until(self, sep):
        while sep not in self.buf:
            self.fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def body(self, head):
        """The body of a message with HEAD (bytes), framing included."""
        h = head.lower()
        if b"transfer-encoding: chunked" in h:
            out = b""
            while True:
                line = self.until(b"\r\n")
                out += line
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = self.until(b"\r\n")
                        out += t
                        if t == b"\r\n":
                            return out
                out += self.exact(size + 2)
        for line in h.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                return self.exact(int(line.split(b":")[1]))
        return b""


def chunked(parts, trailer=b""):
    out = b""
    for i, p in enumerate(parts):
        out += b"%x;n=%d\r\n" % (len(p), i) + p + b"\r\n"
    return out + b"0\r\n" + trailer + b"\r\n"


def answer(method, path, reqbody):
    """(response bytes, close after it)"""
    path = path.split(b"?")[0]
    if path.startswith(b"/len/"):
        n = int(path[5:])
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n
        return (head if method == b"HEAD" else head + body_of(n)), False
    if path == b"/chunked":
        parts = [body_of(5000), b"x", body_of(70000)]
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                chunked(parts, b"X-Sum: 1\r\n")), False
    if path == b"/204":
        return b"HTTP/1.1 204 No Content\r\n\r\n", False
    if path == b"/304":  # a length, but never a body
        return b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", False
    if path == b"/echo":
        return (b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n"
                % len(reqbody) + reqbody), False
    if path == b"/close":  # no length: the body ends with the connection
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body_of(3000), True
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False


class Server:
    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.got, self.sent = [], []  # per connection
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            s, _ = self.ls.accept()
            got, sent = bytearray(), bytearray()
            self.got.append(got)
            self.sent.append(sent)
            threading.Thread(target=self.serve, args=(s, got, sent),
                             daemon=True).start()

    def serve(self, s, got, sent):
        r = Reader(s)
        try:
            while True:
                head = r.until(b"\r\n\r\n")
                method, path = head.split(b" ")[:2]
                if path == b"/early":  # refused before its body came
                    resp = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
                    s.sendall(resp)
                    sent += resp
                    got += head + r.body(head)
                    continue
                if b"expect: 100-continue" in head.lower():
                    s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    sent += b"HTTP/1.1 100 Continue\r\n\r\n"
                body = r.body(head)
                got += head + body
                raw = body
                if b"transfer-encoding: chunked" in head.lower():  # unframed
                    raw, rest = b"", body
                    while True:
                        line, rest = rest.split(b"\r\n", 1)
                        n = int(line.split(b";")[0], 16)
                        if n == 0:
                            break
                        raw, rest = raw + rest[:n], rest[n + 2:]
                resp, close = answer(method, path, raw)
                s.sendall(resp)
                sent += resp
                if close:
                    s.close()
                    return
        except (EOFError, OSError):
            s.close()


# ---------------------------------------------------------------------------
# the proxy


PROXIES = []  # every proxy started, stopped at exit whatever happened


@atexit.register
def kill_proxies():
    for p in PROXIES:
        if p.poll() is None:
            p.kill()
            p.wait()


def start_proxy(port, *args):
    log = os.path.join(TMP, "proxy-%d.log" % len(os.listdir(TMP)))
    p = subprocess.Popen([PROXY, "--listen", "127.0.0.1:0", "--target",
                          "127.0.0.1:%d" % port, "--log", log,
                          "--stats", log + ".stats"] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    PROXIES.append(p)
    line = p.stdout.readline().strip()
    if not line.isdigit():
        fail("the proxy printed no port: %r %r" % (line, p.stderr.read()))
    return p, int(line), log


def stop_proxy(p):
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("the proxy did not exit within 10 s of SIGTERM")
    err = p.stderr.read().decode()
    if rc != 0:
        fail("the proxy exited %d on SIGTERM: %s" % (rc, err))
    return err


def stats(p, log):
    path = log + ".stats"
    if os.path.exists(path):
        os.unlink(path)
    p.send_signal(signal.SIGUSR1)
    end = time.time() + 10
    while not os.path.exists(path):
        if time.time() > end:
            fail("no stats file 10 s after SIGUSR1")
        time.sleep(0.02)
    kv, keys = {}, {}
    for line in open(path):
        if line.startswith("key "):
            _, m, reqs, okc, out, path_ = line.split(" ", 5)
            keys[(m, path_.rstrip("\n"))] = (int(reqs), int(okc), int(out))
        else:
            k, v = line.strip().split("=")
            kv[k] = int(v)
    return kv, keys


def log_lines(log):
    return [l.split() for l in open(log)]


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out
        out += d


srv = Server()
proxy, pport, log = start_proxy(srv.port, "--delay-ms", str(DELAY_MS),
                                "--conn-mbps", "0")
ok("port 0: the proxy listens on a free port and prints it first (%d)" % pport)

# --- every kind of message, pipelined on one connection, sent in one go
putbody = body_of(100000)
reqs = [
    b"GET /len/0 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /len/200000 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /len/123456 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /chunked?part=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /204 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /304 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PUT /echo HTTP/1.1\r\nHost: x\r\ncontent-length:  %d \r\n\r\n"
    % len(putbody) + putbody,
    b"PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
    chunked([b"abc", body_of(9000), b"z"], b"X-T: 2\r\n"),
    b"GET /len/7 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n",
]
sent = b"".join(reqs)
s = connect(pport)
s.sendall(sent)
got = read_all(s)  # /close ends it
s.close()
if len(srv.got) != 1:
    fail("one client connection became %d at the server" % len(srv.got))
if bytes(srv.got[0]) != sent:
    fail("the server got other bytes than the client sent (%d vs %d)"
         % (len(srv.got[0]), len(sent)))
if got != bytes(srv.sent[0]):
    fail("the client got other bytes than the server sent (%d vs %d)"
         % (len(got), len(srv.sent[0])))
ok("10 pipelined requests (lengths, chunked, HEAD, 204, 304, until close): "
   "every byte unchanged both ways")

want = [("GET", "/len/0", "200", "0", "0"),
        ("GET", "/len/200000", "200", "0", "200000"),
        ("HEAD", "/len/123456", "200", "0", "0"),
        ("GET", "/chunked?part=1", "200", "0", str(5000 + 1 + 70000)),
        ("GET", "/204", "204", "0", "0"),
        ("GET", "/304", "304", "0", "0"),
        ("PUT", "/echo", "201", "100000", "100000"),
        ("PUT", "/echo", "201", "9004", "9004"),
        ("GET", "/len/7", "200", "0", "7"),
        ("GET", "/close", "200", "0", "3000")]
end = time.time() + 10
while len(log_lines(log)) < len(want) and time.time() < end:
    time.sleep(0.05)
lines = log_lines(log)
if [tuple(l[:5]) for l in lines] != want:
    fail("the log is not one line per request as sent:\n%s"
         % "\n".join(" ".join(l) for l in lines))
ttfb = [float(l[5]) for l in lines]
if min(ttfb) < DELAY_MS * 0.99:
    fail("a first byte left before the %d ms delay: %s" % (DELAY_MS, ttfb))
ok("the log: one line per request, method, target, status, body sizes; "
   "each first byte held >= %d ms" % DELAY_MS)

# --- a request sent a byte at a time, with 100 Continue
s = connect(pport)
req = (b"PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
       b"Content-Length: 5\r\n\r\n")
for i in range(len(req)):
    s.sendall(req[i:i + 1])
    time.sleep(0.001)
r = Reader(s)
if r.until(b"\r\n\r\n") != b"HTTP/1.1 100 Continue\r\n\r\n":
    fail("no 100 Continue through the proxy")
s.sendall(b"hello")
head = r.until(b"\r\n\r\n")
if not head.startswith(b"HTTP/1.1 201") or r.body(head) != b"hello":
    fail("the answer after 100 Continue is wrong: %r" % head)
t0 = time.time()
s.sendall(b"GET /len/5 HTTP/1.1\r\nHost: x\r\n\r\n")
head = r.until(b"\r\n\r\n")
first = time.time() - t0
if r.body(head) != body_of(5):
    fail("the connection after 100 Continue answers wrong")
if first < DELAY_MS / 1000 * 0.95:
    fail("a first byte came %.3f s after the request: less than the delay"
         % first)
s.close()
ok("a head sent byte by byte, 100 Continue, the next request on the same "
   "connection; the client saw its first byte >= %d ms later" % DELAY_MS)

# --- an answer before the request's body has all come (a store refusing
# a PUT at its head): the body still goes through, the connection goes on
s = connect(pport)
s.sendall(b"PUT /early HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n")
r = Reader(s)
head = r.until(b"\r\n\r\n")
if not head.startswith(b"HTTP/1.1 403"):
    fail("no early answer: %r" % head)
for i in range(30):
    s.sendall(body_of(10000))
s.sendall(b"GET /len/9 HTTP/1.1\r\nHost: x\r\n\r\n")
if r.body(r.until(b"\r\n\r\n")) != body_of(9):
    fail("the connection after an early answer answers wrong")
s.close()
ok("an answer before its request's body ended: the body goes on, so does "
   "the connection")

# --- the counters
kv, keys = stats(proxy, log)
if kv["requests"] != 14 or kv["requests_get"] != 9 or kv["requests_put"] != 4 \
        or kv["requests_head"] != 1:
    fail("request counters: %s" % kv)
if keys.get(("GET", "/chunked")) != (1, 1, 75001):
    fail("the key /chunked (query left out): %s" % keys.get(("GET", "/chunked")))
if keys.get(("PUT", "/echo")) != (3, 3, 100000 + 9004 + 5):
    fail("the key PUT /echo: %s" % keys.get(("PUT", "/echo")))
if kv["connections"] != 3 or kv["errors"] != 0 or kv["unanswered"] != 0:
    fail("connection counters: %s" % kv)
if kv["body_in"] != 100000 + 9004 + 5 + 300000:
    fail("body_in %d" % kv["body_in"])
ok("SIGUSR1 writes the counters: by method, per key (path without query), "
   "bodies, connections")

# --- a broken server message: the connection is dropped, the proxy lives
bad = socket.socket()
bad.bind(("127.0.0.1", 0))
bad.listen(4)


def bad_server():
    c, _ = bad.accept()
    Reader(c).until(b"\r\n\r\n")
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n12345")
    time.sleep(5)
    c.close()


threading.Thread(target=bad_server, daemon=True).start()
stop_proxy(proxy)
proxy, pport, log = start_proxy(bad.getsockname()[1], "--delay-ms", "0")
s = connect(pport)
s.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(3)
try:
    got = read_all(s)
except socket.timeout:
    fail("a malformed answer (two lengths) kept the connection open")
if got:
    fail("a malformed answer was passed on: %r" % got)
err = stop_proxy(proxy)
if "not HTTP/1.1" not in err or "errors=1" not in err:
    fail("the malformed answer is not reported: %s" % err)
ok("two Content-Lengths from the server: the connection dropped, "
   "reported, counted")

# --- a target that is the proxy itself: refused at start
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
port = ls.getsockname()[1]
ls.close()
p = subprocess.run([PROXY, "--listen", "127.0.0.1:%d" % port, "--target",
                    "127.0.0.1:%d" % port], capture_output=True, timeout=10)
if p.returncode != 1 or b"is the proxy itself" not in p.stderr:
    fail("a proxy aimed at itself: exit %d, %r" % (p.returncode, p.stderr))
ok("a proxy aimed at itself: refused at start")

# --- caps: lower bounds (a cap can only make it slower)
proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0",
                                "--conn-mbps", "4")
s = connect(pport)
t0 = time.time()
s.sendall(b"GET /len/2000000 HTTP/1.1\r\nHost: x\r\n\r\n")
r = Reader(s)
head = r.until(b"\r\n\r\n")
if r.body(head) != body_of(2000000):
    fail("a capped body came back wrong")
secs = time.time() - t0
if secs < 0.4:
    fail("2 MB at a 4 MB/s cap per connection took %.2f s (>= 0.5 expected)"
         % secs)
s.close()
stop_proxy(proxy)
ok("2 MB through a 4 MB/s connection cap: %.2f s" % secs)

proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0", "--conn-mbps",
                                "0", "--total-mbps", "4")
results = []


def fetch():
    s = connect(pport)
    s.sendall(b"GET /len/1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
    r = Reader(s)
    results.append(r.body(r.until(b"\r\n\r\n")) == body_of(1000000))
    s.close()


t0 = time.time()
ts = [threading.Thread(target=fetch) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
secs = time.time() - t0
if results != [True] * 4:
    fail("a body through the total cap came back wrong")
if secs < 0.8:
    fail("4 x 1 MB at a 4 MB/s total cap took %.2f s (>= 1 expected)" % secs)
stop_proxy(proxy)
ok("4 connections x 1 MB through a 4 MB/s total cap: %.2f s" % secs)

# --- the request way is capped too, unless --responses-only
for extra, capped in (([], True), (["--responses-only"], False)):
    proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0",
                                    "--conn-mbps", "4", *extra)
    s = connect(pport)
    body = body_of(2000000)
    t0 = time.time()
    s.sendall(b"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    up = time.time() - t0  # the kernel's buffers take the last ~2 MB
    r = Reader(s)
    head = r.until(b"\r\n\r\n")
    if r.body(head) != body:
        fail("a PUT body came back wrong")
    secs = time.time() - t0
    s.close()
    stop_proxy(proxy)
    # capped: 4 MB each way, >= 1 s in all; responses only: >= 0.5 s
    if secs < (0.8 if capped else 0.4):
        fail("a 2 MB PUT echoed at a 4 MB/s cap %s took %.2f s"
             % ("both ways" if capped else "on responses", secs))
ok("a PUT's body is capped too; --responses-only lets it through")

# --- --max-conns: a connection over the cap waits until one ends
proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0",
                                "--max-conns", "1")
a = connect(pport)
a.sendall(b"GET /len/1 HTTP/1.1\r\nHost: x\r\n\r\n")
Reader(a).until(b"\r\n\r\n")
b = connect(pport)  # the kernel takes it into the backlog
b.sendall(b"GET /len/2 HTTP/1.1\r\nHost: x\r\n\r\n")
b.settimeout(0.5)
try:
    if b.recv(100):
        fail("a connection over --max-conns 1 was served")
except socket.timeout:
    pass
a.close()
b.settimeout(10)
r = Reader(b)
if r.body(r.until(b"\r\n\r\n")) != body_of(2):
    fail("the waiting connection was not served after the first ended")
b.close()
err = stop_proxy(proxy)
ok("--max-conns 1: the second connection waits, then is served")

# --- a client that goes away in the middle of an answer: no error, the
# proxy goes on
proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0", "--conn-mbps",
                                "1")
s = connect(pport)
s.sendall(b"GET /len/1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
s.recv(10)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
s.close()  # a reset
s = connect(pport)
s.sendall(b"GET /len/3 HTTP/1.1\r\nHost: x\r\n\r\n")
r = Reader(s)
if r.body(r.until(b"\r\n\r\n")) != body_of(3):
    fail("no answer after a client went away")
s.close()
time.sleep(0.5)
kv, keys = stats(proxy, log)
if kv["errors"] != 0 or kv["resets"] != 1 or kv["unanswered"] != 1 \
        or kv["status_2xx"] != 1:
    fail("a client gone in the middle of an answer: %s" % kv)
err = stop_proxy(proxy)
if err.count("slowproxy:") != 1:  # the totals only
    fail("messages for a client that went away: %s" % err)
ok("a client reset in the middle of an answer: counted (a reset, an "
   "answer not whole), no error, the next connection served")

# --- SIGTERM with a connection open in the middle of a slow answer
proxy, pport, log = start_proxy(srv.port, "--delay-ms", "0", "--conn-mbps",
                                "0.05")
s = connect(pport)
s.sendall(b"GET /len/1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
s.recv(10)
t0 = time.time()
err = stop_proxy(proxy)
if time.time() - t0 > 5:
    fail("SIGTERM took %.1f s with a capped answer going" % (time.time() - t0))
if "requests=1" not in err:
    fail("no totals on stderr at exit: %s" % err)
ok("SIGTERM in the middle of a capped answer: exit 0 at once, totals printed")

# --- SIGTERM with connections waiting to connect to a server that takes
# none (its backlog full)
full = socket.socket()
full.bind(("127.0.0.1", 0))
full.listen(1)
proxy, pport, log = start_proxy(full.getsockname()[1], "--delay-ms", "0")
clients = [connect(pport) for _ in range(8)]
time.sleep(0.5)
t0 = time.time()
err = stop_proxy(proxy)
if time.time() - t0 > 3 or "did not end" in err:
    fail("SIGTERM with connections waiting to connect: %.1f s, %s"
         % (time.time() - t0, err))
ok("SIGTERM with connections waiting to connect to a full server: exit 0 "
   "at once")
