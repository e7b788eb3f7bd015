#!/usr/bin/env python3
"""The Python client worker of the safety suite: the same loop and JSON-lines protocol as the Rust worker
(tests/faults/src/worker.rs, described in tests/faults/README.md), on the fencelock Python package.

Timestamps come from the raw clock_gettime syscall, which libfaketime (preloaded for clock-jump faults) does not
intercept; the SDK inside, through libc, sees the faked clock.
"""

import argparse
import ctypes
import json
import os
import random
import socket
import sys
import threading
import time

import fencelock

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_CLOCK_GETTIME = 228  # x86_64
_CLOCK_MONOTONIC = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def t_ref() -> int:
    ts = _Timespec()
    if _libc.syscall(_SYS_CLOCK_GETTIME, _CLOCK_MONOTONIC, ctypes.byref(ts)) != 0:
        raise OSError(ctypes.get_errno(), "clock_gettime")
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec


class Emitter:
    def __init__(self, client: str) -> None:
        self.client = client
        self.pid = os.getpid()
        self.seq = 0
        self.lock = threading.Lock()  # lost callbacks run on their own threads

    def emit(self, kind, f, session=None, token=None, error=None, hold=None, slot=None):
        with self.lock:
            e = {"src": "worker", "type": kind, "f": f, "client": self.client, "lang": "python", "pid": self.pid,
                 "seq": self.seq, "t_ref": t_ref()}
            self.seq += 1
            if session is not None:
                e["session"] = session
            if token is not None:
                e["token"] = token
            if error is not None:
                e["error"] = error
            if hold is not None:
                e["hold"] = hold
            if slot is not None:
                e["slot"] = slot
            sys.stdout.write(json.dumps(e) + "\n")
            sys.stdout.flush()


class Referee:
    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.file = self.sock.makefile("rwb")

    def call(self, req):
        self.file.write((json.dumps(req) + "\n").encode())
        self.file.flush()
        reply = json.loads(self.file.readline())
        return reply["ok"], reply["values"]


def code(err: Exception) -> str:
    kind = getattr(err, "kind", None)
    return kind.name if kind is not None else type(err).__name__


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--referee", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--ttl-ms", type=int, default=2000)
    ap.add_argument("--name", default="locktest")
    ap.add_argument("--key", default="register")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload", choices=["mutex", "rwlock", "semaphore", "election"], default="mutex")
    ap.add_argument("--permits", type=int, default=2)
    ap.add_argument("--careless", action="store_true", help="no lost check before a write (the canary's user)")
    args = ap.parse_args()

    out = Emitter(args.client)
    stop = threading.Event()

    def watch_stdin() -> None:
        for _ in sys.stdin:
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    referee = Referee(args.referee)
    while True:
        try:
            client = fencelock.connect(args.url)
            break
        except fencelock.LockError:
            if stop.is_set():
                raise
            time.sleep(0.2)
    ttl = args.ttl_ms / 1000
    owner = f"{args.client}-main"
    rng = random.Random(args.seed ^ os.getpid())
    n = 0
    rw, sem = client.rw_lock(args.name), client.semaphore(args.name, args.permits)
    election = client.election(args.name)
    while not stop.is_set():
        # The rw workload: 60 % reads. The mutex's events carry no hold kind.
        hold = {"mutex": None, "semaphore": "permit", "election": "leader"}.get(args.workload)
        if args.workload == "rwlock":
            hold = "read" if rng.random() < 0.6 else "write"
        out.emit("invoke", "acquire", hold=hold)
        take = {None: lambda **kw: client.lock(args.name, **kw), "read": rw.read, "write": rw.write,
                "permit": sem.acquire, "leader": lambda **kw: election.campaign(args.client, **kw)}[hold]
        try:
            lease = take(ttl=ttl, timeout=3 * ttl, owner=owner)
        except fencelock.LockError as e:
            out.emit("fail" if code(e) == "TIMEOUT" else "info", "acquire", error=code(e))
            time.sleep(0.1)
            continue
        n += 1
        session = f"{args.client}.{os.getpid()}.{n}"
        token = lease.fence
        out.emit("ok", "acquire", session, token, hold=hold, slot=lease.slot)
        lease.on_lost(lambda s=session, t=token: out.emit("lost", "lost", s, t, "LOCK_LOST"))
        critical_section(client, lease, hold, args, owner, referee, out, session, rng, ttl)
        out.emit("invoke", "release", session, token)
        try:
            lease.release()
            out.emit("ok", "release", session, token)
        except fencelock.LockError as e:
            out.emit("fail", "release", session, token, code(e))
        time.sleep(ttl * rng.uniform(0.0, 0.1))
    client.close()


def critical_section(client, lease, hold, args, owner, referee, out, session, rng, ttl) -> None:
    token = lease.fence
    if hold is None and rng.random() < 0.2:
        # Reentrancy: the same owner gets the same grant back (P8).
        out.emit("invoke", "nested-acquire", session, token)
        try:
            inner = client.lock(args.name, ttl=ttl, timeout=3 * ttl, owner=owner)
            out.emit("ok", "nested-acquire", session, inner.fence)
            try:
                inner.release()
                out.emit("ok", "nested-release", session, token)
            except fencelock.LockError as e:
                out.emit("fail", "nested-release", session, token, code(e))
        except fencelock.LockError as e:
            out.emit("fail" if code(e) == "TIMEOUT" else "info", "nested-acquire", session, error=code(e))
    # Each semaphore slot is a register of its own, fenced by the slot's token.
    key = args.key if lease.slot is None else f"{args.key}.slot{lease.slot}"
    base = {"key": key, "client": args.client, "session": session, "token": token}
    if hold is not None:
        base["hold"] = hold
    # A refused read does not end the cycle: the shadow and cas registers must see what an unfenced resource would.
    _, values = referee.call({**base, "op": "read"})
    time.sleep(ttl * rng.uniform(0.1, 1.5))  # work; the long tail crosses the TTL
    if hold == "read":
        # A reader reads again at the end (the checker: no write in between), then renews once (P6).
        if lease.lost.is_set():
            return
        referee.call({**base, "op": "read"})
        renew(lease, out, session)
        return
    writes = 2 if rng.random() < 0.3 else 1
    for i in range(writes):
        if not args.careless and lease.lost.is_set():  # a careful user; a pause after this is what fencing is for
            return
        # The SDK's own register on the backend decides the fenced write; the referee only records its answer.
        fenced = fence_write(client, key, token, lease.slot, session, out)
        _, values = referee.call({**base, "op": "write", "fenced": fenced, "values": [v + 1 for v in values]})
        if i == 0:
            renew(lease, out, session)
            if writes > 1:
                time.sleep(ttl * rng.uniform(0.0, 0.3))


def renew(lease, out, session) -> None:
    out.emit("invoke", "renew", session, lease.fence)
    try:
        lease.renew()
        out.emit("ok", "renew", session, lease.fence)
    except fencelock.LockError as e:
        out.emit("fail", "renew", session, lease.fence, code(e))


def fence_write(client, key, token, slot, session, out):
    """A write of the hold's token to the SDK's own Fence register ``key`` on the backend: whether it was accepted,
    None when the answer is unknown (an indeterminate error is no refusal)."""
    out.emit("invoke", "fence-write", session, token, slot=slot)
    try:
        client.fence(key).write(token, session.encode())
    except fencelock.LockError as e:
        refused = code(e) == "FENCED"
        out.emit("fail" if refused else "info", "fence-write", session, token, code(e), slot=slot)
        return False if refused else None
    out.emit("ok", "fence-write", session, token, slot=slot)
    return True


if __name__ == "__main__":
    main()
