#!/usr/bin/env python3
"""redisproxy.py - a TCP proxy between a granary client and Redis that
loses one lock call, for t0225-lock-replay.sh. Loopback only.

  redisproxy.py PORTFILE TARGET_PORT RULE [PORT]

listens on PORT of 127.0.0.1 (default: a free one; written to PORTFILE
once it listens), forwards every connection to 127.0.0.1:TARGET_PORT and follows
RULE once (the first time it applies; every later call goes through):

  drop-unlock      the first unlock (FCALL of lock_set, type 0) is never
                   forwarded: both sides of its connection are closed
  drop-lock-reply  the first lock (lock_set, type 1 or 2) is forwarded,
                   then both sides are closed when Redis answers it: the
                   lock is granted and the client never hears so
  none             nothing is lost

Prints one line when the rule fires ("dropped unlock", "dropped lock
reply"), flushed, so that the test can tell the loss happened.
"""
import os
import socket
import sys
import threading

LOCK = threading.Lock()
FIRED = set()


def fire(rule):
    """True once per rule: the first call that asks."""
    with LOCK:
        if rule in FIRED:
            return False
        FIRED.add(rule)
        return True


def parse_command(buf):
    """One RESP command (an array of bulk strings, as hiredis sends) from
    the start of buf: (args, length), or (None, 0) when it is not whole."""
    if not buf.startswith(b"*"):
        return None, 0
    end = buf.find(b"\r\n")
    if end < 0:
        return None, 0
    n, pos, args = int(buf[1:end]), end + 2, []
    for _ in range(n):
        end = buf.find(b"\r\n", pos)
        if end < 0 or buf[pos:pos + 1] != b"$":
            return None, 0
        ln = int(buf[pos + 1:end])
        if len(buf) < end + 2 + ln + 2:
            return None, 0
        args.append(buf[end + 2:end + 2 + ln])
        pos = end + 2 + ln + 2
    return args, pos


def lock_type(args):
    """The type argument of a lock_set call (FCALL name 0 kind ino sid
    owner type ...), or None for any other command."""
    if len(args) < 8 or args[0].upper() != b"FCALL":
        return None
    if not args[1].endswith(b"_lock_set"):
        return None
    return args[7]


def serve(client, rule, target):
    server = socket.create_connection(("127.0.0.1", target))
    state = {"drop_on_reply": False, "closed": False}

    def close_both():
        state["closed"] = True
        for s in (client, server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def upstream():
        buf = b""
        try:
            while not state["closed"]:
                data = client.recv(65536)
                if not data:
                    break
                buf += data
                while buf:
                    args, n = parse_command(buf)
                    if not n:
                        break
                    ty = lock_type(args)
                    if ty == b"0" and rule == "drop-unlock" and fire(rule):
                        print("dropped unlock", flush=True)
                        close_both()
                        return
                    if (ty in (b"1", b"2") and rule == "drop-lock-reply"
                            and fire(rule)):
                        state["drop_on_reply"] = True
                    server.sendall(buf[:n])
                    buf = buf[n:]
        except OSError:
            pass
        if not state["closed"]:
            close_both()

    def downstream():
        try:
            while not state["closed"]:
                data = server.recv(65536)
                if not data:
                    break
                if state["drop_on_reply"]:
                    print("dropped lock reply", flush=True)
                    close_both()
                    return
                client.sendall(data)
        except OSError:
            pass
        if not state["closed"]:
            close_both()

    threading.Thread(target=upstream, daemon=True).start()
    threading.Thread(target=downstream, daemon=True).start()


def main():
    portfile, target, rule = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    if rule not in ("drop-unlock", "drop-lock-reply", "none"):
        sys.exit("redisproxy: unknown rule '%s'" % rule)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % lsock.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    while True:
        client, _ = lsock.accept()
        try:
            serve(client, rule, target)
        except OSError:
            client.close()


if __name__ == "__main__":
    main()
