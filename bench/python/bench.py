"""Python benchmark of fencelock on Redis, each figure next to a baseline measured in the same run on the same server.

1. Uncontended acquire+release (one client, one thread, default options: ttl 30 s, watchdog on):
   fencelock from Python vs the same cycle through Rust (``target/release/fencelock-bench``, if built) vs redis-py's
   ``Lock`` (SET NX PX + a compare-and-delete script).
2. Contended hand-off: PROCS processes (each its own client) on one lock, each asking again as soon as it has
   released; the gap is the time from a holder's release call to the next holder's lock returning (one monotonic
   clock), p50 and p99 — fencelock (woken by pub/sub) vs redis-py's ``Lock`` (polls every ``sleep`` seconds, 0.1 by
   default).

On demand, not a test. Run it in a venv holding a release build of the package and redis-py::

    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install ./python redis
    scripts/services.sh start /tmp/bench-svc && source /tmp/bench-svc/env
    cargo build --release -p fencelock-bench            # optional: the Rust column
    /tmp/bench-venv/bin/python bench/python/bench.py [--redis URL] [--seconds 3] [--procs 8]

Keys used: ``bench-py-*`` and their ``redisson_lock_token:{…}`` counters.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import fencelock

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 200


def percentile(xs: List[float], p: float) -> float:
    """The p-th percentile (nearest rank) of xs."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s))) - 1))]


def timed_cycles(cycle: Callable[[], None], seconds: float) -> Tuple[float, float, float]:
    """(cycles/s, p50 µs, p99 µs) of `cycle` run back to back for `seconds` after a warm-up."""
    for _ in range(WARMUP):
        cycle()
    lat: List[float] = []
    start = time.perf_counter()
    end = start + seconds
    while True:
        t0 = time.perf_counter()
        cycle()
        t1 = time.perf_counter()
        lat.append((t1 - t0) * 1e6)
        if t1 >= end:
            break
    return len(lat) / (time.perf_counter() - start), percentile(lat, 50), percentile(lat, 99)


def fencelock_cycle(url: str) -> Callable[[], None]:
    client = fencelock.connect(url)
    name = f"bench-py-uncontended-{uuid.uuid4().hex[:8]}"

    def cycle() -> None:
        client.lock(name).release()

    return cycle


def redis_py_cycle(url: str) -> Callable[[], None]:
    import redis

    r = redis.Redis.from_url(url)
    name = f"bench-py-redis-py-{uuid.uuid4().hex[:8]}"

    def cycle() -> None:
        lock = r.lock(name, timeout=30)
        lock.acquire()
        lock.release()

    return cycle


def rust_figures(url: str, seconds: float) -> Optional[List[str]]:
    """The Redis lines of fencelock-bench's figures 1 and 2, if the release binary is built."""
    exe = ROOT / "target" / "release" / "fencelock-bench"
    if not exe.exists():
        return None
    out = subprocess.run(
        [str(exe), "--backend", "redis", "--redis", url, "--seconds", str(seconds)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return lines if out.returncode == 0 else lines + [f"(fencelock-bench exited {out.returncode}: {out.stderr.strip()})"]


Hold = Tuple[int, int, int]  # (acquired ns, releasing ns, worker)


def contender(
    kind: str, url: str, name: str, seconds: float, start_at: float, worker: int, q: "mp.Queue[List[Hold]]"
) -> None:
    """One contending process: (acquired_ns, releasing_ns, worker) of each of its holds."""
    holds: List[Hold] = []
    if kind == "fencelock":
        client = fencelock.connect(url)

        def take() -> Callable[[], None]:
            return client.lock(name, timeout=30.0).release

    else:
        import redis

        r = redis.Redis.from_url(url)

        def take() -> Callable[[], None]:
            lock = r.lock(name, timeout=30, blocking_timeout=30)
            lock.acquire()
            release: Callable[[], None] = lock.release
            return release

    while time.time() < start_at:
        time.sleep(0.001)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        release = take()
        acquired = time.monotonic_ns()
        releasing = time.monotonic_ns()
        release()
        holds.append((acquired, releasing, worker))
    q.put(holds)


def handoff(kind: str, url: str, procs: int, seconds: float) -> Tuple[int, float, float, float, float]:
    """(hand-offs, gap p50 µs, gap p99 µs, gap p50 µs to another process, share to another) for `procs` processes."""
    ctx = mp.get_context("spawn")
    q: "mp.Queue[List[Hold]]" = ctx.Queue()
    name = f"bench-py-handoff-{kind}-{uuid.uuid4().hex[:8]}"
    start_at = time.time() + 3.0  # every process connected and waiting
    ps = [ctx.Process(target=contender, args=(kind, url, name, seconds, start_at, i, q)) for i in range(procs)]
    for p in ps:
        p.start()
    holds = [h for _ in ps for h in q.get(timeout=seconds + 120)]
    for p in ps:
        p.join()
    holds.sort()
    gaps = [(b[0] - a[1]) / 1e3 for a, b in zip(holds, holds[1:])]
    other = [(b[0] - a[1]) / 1e3 for a, b in zip(holds, holds[1:]) if a[2] != b[2]]
    share = len(other) / max(1, len(gaps))
    return len(gaps), percentile(gaps, 50), percentile(gaps, 99), percentile(other, 50) if other else float("nan"), share


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis", default=os.environ.get("FENCELOCK_TEST_REDIS"), help="Redis URL (FENCELOCK_TEST_REDIS)")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each timed phase")
    ap.add_argument("--procs", type=int, default=8, help="contending processes in figure 2")
    args = ap.parse_args()
    if not args.redis:
        ap.error("no Redis: pass --redis URL or set FENCELOCK_TEST_REDIS")
    url = args.redis
    print(f"fencelock {fencelock.__version__} from {Path(fencelock.__file__).parent}, Python {sys.version.split()[0]}")
    print(f"Redis {url}, {args.seconds:g} s per phase\n")

    print("1. uncontended acquire+release (one thread)")
    print(f"   {'':<22}{'cycles/s':>10}{'p50 µs':>10}{'p99 µs':>10}")
    fl = timed_cycles(fencelock_cycle(url), args.seconds)
    rp = timed_cycles(redis_py_cycle(url), args.seconds)
    for label, (rate, p50, p99) in (("fencelock (Python)", fl), ("redis-py Lock", rp)):
        print(f"   {label:<22}{rate:>10.0f}{p50:>10.0f}{p99:>10.0f}")
    print(f"   fencelock ÷ redis-py: {fl[0] / rp[0]:.2f}× cycles/s, {fl[1] / rp[1]:.2f}× p50")
    rust = rust_figures(url, args.seconds)
    if rust is None:
        print("   (fencelock through Rust: target/release/fencelock-bench is not built; Python figures alone)")
    else:
        print("   fencelock through Rust (fencelock-bench --backend redis, same server, same run):")
        for line in rust:
            print(f"     | {line}")

    print(f"\n2. contended hand-off, {args.procs} processes, each its own client")
    print(f"   {'':<22}{'hand-offs':>10}{'gap p50 µs':>12}{'gap p99 µs':>12}{'p50 to other':>14}{'to other':>10}")
    for kind, label in (("fencelock", "fencelock (Python)"), ("redis-py", "redis-py Lock")):
        n, p50, p99, other, share = handoff(kind, url, args.procs, args.seconds)
        print(f"   {label:<22}{n:>10}{p50:>12.0f}{p99:>12.0f}{other:>14.0f}{share:>9.0%}")
    print("   (gap: a holder's release() call → the next holder's lock() return; 'to other': hand-offs between processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
