"""The interpreter of the shared conformance scenarios (tests/conformance/*.json at the repository root), ported from
core/tests/conformance.rs: the same steps, checks and matrix row, through the Python API."""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import fencelock

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "tests" / "conformance"

# The BACKENDS table, as in the Rust runner: (label, env var, an address of that backend where nothing answers).
SERVED = [
    ("redis", "FENCELOCK_TEST_REDIS", "redis://127.0.0.1:1"),
    ("redis-tls", "FENCELOCK_TEST_REDIS_SECURE", "rediss://127.0.0.1:1"),
    ("redlock", "FENCELOCK_TEST_REDLOCK", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"),
    ("redis_sentinel", "FENCELOCK_TEST_SENTINEL", "redis+sentinel://127.0.0.1:1/fencelock-master"),
    ("etcd", "FENCELOCK_TEST_ETCD", "etcd://127.0.0.1:1"),
    ("postgres", "FENCELOCK_TEST_POSTGRES", "postgres://postgres@127.0.0.1:1/fencelock_test"),
    ("mysql", "FENCELOCK_TEST_MYSQL", "mysql://root@127.0.0.1:1/fencelock_test"),
    ("zk", "FENCELOCK_TEST_ZK", "zk://127.0.0.1:1"),
]


#: The capability flags a scenario's ``unless`` and ``requires`` name, as ``Capability`` spells them.
FLAGS = ("fencing", "native_wait", "fair", "session_bound", "rw_lock", "semaphore", "election")

#: The longest any one step may take (the longest ``pause`` or ``within_ms`` of a scenario is a few seconds).
STEP_BOUND = 60.0


@dataclass
class Scenario:
    """One scenario file."""

    name: str
    unless: List[str]
    steps: List[Dict[str, Any]]
    #: Capabilities the scenario needs (``rw_lock``, ``semaphore``); a backend without one skips it.
    requires: List[str] = field(default_factory=list)


def scenarios() -> List[Scenario]:
    """Every scenario, in file-name order."""
    out = []
    for path in sorted(SCENARIO_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        unless, requires = list(data.get("unless", [])), list(data.get("requires", []))
        out.append(Scenario(data["name"], unless, list(data["steps"]), requires))
    return out


#: The kind of hold of a ``lock``/``try_lock`` step: ``(kind, permits)``, kind ``None`` for a mutex.
Kind = Tuple[Optional[str], int]


def kind(step: Dict[str, Any]) -> Kind:
    """``kind`` "read", "write", "permit" (with ``permits``) or "leader", else a mutex."""
    k = step.get("kind")
    if k not in (None, "read", "write", "permit", "leader"):
        raise AssertionError(f"unknown kind {k}")
    return k, int(step["permits"]) if k == "permit" else 0


def acquire(client: fencelock.Client, name: str, k: Kind, step: Dict[str, Any], once: bool) -> Optional[fencelock.Lease]:
    """One acquire of kind ``k`` through the public API: ``lock`` (``once`` false) or ``try_lock`` and their kin.

    A step without ``owner`` is its own owner, as in the Rust runner (Python's default, the thread, would make all
    the steps of a client one owner).
    """
    ttl = _ms(step.get("ttl_ms", 30000))
    assert ttl is not None
    watchdog = bool(step.get("watchdog", True))
    owner = step["owner"] if "owner" in step else unique("step")
    fair = step.get("fair")
    timeout = _ms(step.get("timeout_ms"))
    which, permits = k
    if which == "leader":
        election = client.election(name)
        if once:
            return election.try_campaign(value_of(step), ttl, watchdog, owner)
        return election.campaign(value_of(step), ttl, timeout, watchdog, owner)
    if which in ("read", "write"):
        rw = client.rw_lock(name)
        if once:
            return (rw.try_read if which == "read" else rw.try_write)(ttl, watchdog, owner, fair)
        return (rw.read if which == "read" else rw.write)(ttl, timeout, watchdog, owner, fair)
    if which == "permit":
        sem = client.semaphore(name, permits)
        return sem.try_acquire(ttl, watchdog, owner, fair) if once else sem.acquire(ttl, timeout, watchdog, owner, fair)
    if once:
        return client.try_lock(name, ttl, watchdog, owner, fair=fair)
    return client.lock(name, ttl, timeout, watchdog, owner, fair=fair)


def value_of(step: Dict[str, Any]) -> bytes:
    """The value a step campaigns or proclaims with: ``value`` (UTF-8), or ``value_len`` bytes."""
    if "value_len" in step:
        return b"v" * int(step["value_len"])
    return str(step.get("value", "")).encode()


class Observed:
    """An observer started with ``observe``: a thread takes its reports, in order, for ``expect_observed``, so no
    change passes unseen between steps; it ends when the client closes."""

    def __init__(self, observer: fencelock.Observer) -> None:
        self.reports: "queue.Queue[Any]" = queue.Queue()
        self._observer = observer
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                self.reports.put(self._observer.get())
            except fencelock.Closed:
                return
            except fencelock.LockError as e:  # reported, and the stream goes on
                self.reports.put(e)

    def next(self, bound: float) -> Optional[fencelock.Leader]:
        try:
            report = self.reports.get(timeout=bound)
        except queue.Empty:
            raise StepFailed(f"no change observed within {bound}s") from None
        if isinstance(report, fencelock.LockError):
            raise StepFailed(f"observe failed: {type(report).__name__}: {report}")
        return report


class Spawned:
    """An acquire started with ``spawn``, on a thread of its own; ``join`` waits for its outcome."""

    def __init__(self, run: Any) -> None:
        self.lease: Optional[fencelock.Lease] = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self._thread.start()

    def _run(self, run: Any) -> None:
        try:
            self.lease = run()
        except BaseException as e:  # handed to the joining step
            self.error = e

    def join(self) -> Optional[fencelock.Lease]:
        self._thread.join(STEP_BOUND)
        if self._thread.is_alive():
            raise StepFailed(f"the spawned acquire did not finish within {STEP_BOUND}s")
        if self.error is not None:
            raise self.error
        return self.lease


def unique(prefix: str) -> str:
    """A name no other test run uses."""
    return f"{prefix}-{uuid.uuid4().hex}"


class StepFailed(Exception):
    """A step's expectation did not hold."""


def _ms(v: Any) -> Optional[float]:
    return None if v is None else v / 1000.0


def _expected_errors(step: Dict[str, Any]) -> List[fencelock.ErrorKind]:
    want = step.get("expect_error")
    names = [want] if isinstance(want, str) else list(want or [])
    return [fencelock.ErrorKind[n] for n in names]


def _check_mentions(step: Dict[str, Any], error: fencelock.LockError) -> None:
    """``mentions`` must be in the error's message; no ``not_mentions`` in its message, str, repr, args or fields."""
    for word in step.get("mentions", []):
        if word not in error.message:
            raise StepFailed(f"the error does not mention {word!r}: {error}")
    texts = [error.message, str(error), repr(error), repr(error.args), str(error.backend), str(error.lock)]
    for word in step.get("not_mentions", []):
        for text in texts:
            if word in text:
                raise StepFailed(f"the error mentions {word!r}: {text}")


@dataclass
class Run:
    """The state of one scenario run."""

    url: str
    unreachable: Optional[str]
    prefix: str
    clients: Dict[str, fencelock.Client] = field(default_factory=dict)
    leases: Dict[str, fencelock.Lease] = field(default_factory=dict)
    #: Every name the scenario used, with the kind of hold it was first used for (the clean check differs per kind).
    names: List[Tuple[str, Kind]] = field(default_factory=list)
    tasks: Dict[str, Spawned] = field(default_factory=dict)
    observers: Dict[str, Observed] = field(default_factory=dict)
    #: When the previous and the current step began: ``min_elapsed_ms`` counts from the previous one.
    previous_start: float = field(default_factory=time.monotonic)
    current_start: float = field(default_factory=time.monotonic)

    def name(self, step: Dict[str, Any]) -> str:
        if "name_len" in step:
            return "n" * step["name_len"]
        label = step.get("name", "L")
        if label == "" or "\0" in label:
            return str(label)
        name = f"{self.prefix}/{label}"
        if step["op"] in ("lock", "try_lock"):
            k = kind(step)
        elif step["op"] == "expect_available":
            k = ("permit", int(step["permits"]))
        elif step["op"] in ("expect_leader", "observe"):
            k = ("leader", 0)
        else:
            k = (None, 0)
        if all(n != name for n, _ in self.names) and k != ("permit", 0):
            self.names.append((name, k))
        return name

    def client(self, step: Dict[str, Any]) -> fencelock.Client:
        return self.clients[step["client"]]

    def lease(self, step: Dict[str, Any], key: str) -> fencelock.Lease:
        return self.leases[step[key]]

    def step(self, step: Dict[str, Any]) -> None:
        """Runs one step, again every 20 ms within ``eventually_ms`` until it meets its expectations; raises
        StepFailed if it does not."""
        self.previous_start, self.current_start = self.current_start, time.monotonic()
        bound = _ms(step.get("eventually_ms"))
        if bound is None:
            return self.step_once(step)
        deadline = time.monotonic() + bound
        while True:
            try:
                return self.step_once(step)
            except StepFailed as e:
                if time.monotonic() >= deadline:
                    raise StepFailed(f"not within {bound}s: {e}") from None
                time.sleep(0.02)

    def settle(self, step: Dict[str, Any], lease: Optional[fencelock.Lease]) -> None:
        """Checks an acquire's outcome against the step (``expect``, ``min_elapsed_ms``) and keeps the lease ``as``."""
        busy_expected = step.get("expect") == "busy"
        if lease is not None and busy_expected:
            lease.release()
            raise StepFailed("acquired, expected busy")
        if lease is None and not busy_expected:
            raise StepFailed("busy, expected to acquire")
        if lease is not None:
            min_elapsed = _ms(step.get("min_elapsed_ms"))
            # From the previous step's start: the hold this one waits out was written after it.
            elapsed = time.monotonic() - self.previous_start
            if min_elapsed is not None and elapsed < min_elapsed:
                raise StepFailed(f"acquired {elapsed:.3f}s after the previous step began, sooner than {min_elapsed}s")
            if "as" in step:
                self.leases[step["as"]] = lease
            else:
                lease.release()

    def step_once(self, step: Dict[str, Any]) -> None:
        """Runs one step once; raises StepFailed if an expectation fails."""
        op = step["op"]
        if op == "connect" and step.get("url") == "$UNREACHABLE" and self.unreachable is None:
            return  # this backend has no such address (memory://)
        want = _expected_errors(step)
        started = time.monotonic()
        error: Optional[fencelock.LockError] = None
        try:
            self._op(op, step, started)
        except fencelock.LockError as e:
            error = e
        within = _ms(step.get("within_ms"))
        elapsed = time.monotonic() - started
        if within is not None and op not in ("expect_lost", "expect_observed") and elapsed > within:
            raise StepFailed(f"took {elapsed:.3f}s, more than {within}s")
        if error is None and want:
            raise StepFailed(f"succeeded, expected {[k.name for k in want]}")
        if error is not None and not want:
            raise StepFailed(f"failed: {type(error).__name__}: {error}")
        if error is not None and error.kind not in want:
            raise StepFailed(f"failed with {error.kind.name} ({error}), expected {[k.name for k in want]}")
        if error is not None:
            _check_mentions(step, error)

    def _op(self, op: str, step: Dict[str, Any], started: float) -> None:
        if op == "connect":
            url = step.get("url")
            if url == "$UNREACHABLE":
                url = self.unreachable
            timeout = _ms(step.get("connect_timeout_ms"))
            client = fencelock.connect(url or self.url, connect_timeout=timeout)
            self.clients[step["client"]] = client
        elif op == "close":
            self.client(step).close()
        elif op in ("lock", "try_lock"):
            name = self.name(step)
            client = self.client(step)
            k, once = kind(step), op == "try_lock"
            if "spawn" in step:
                self.tasks[step["spawn"]] = Spawned(lambda: acquire(client, name, k, step, once))
                return
            self.settle(step, acquire(client, name, k, step, once))
        elif op == "join":
            self.settle(step, self.tasks.pop(step["task"]).join())
        elif op == "expect_slot":
            mine = self._slot(self.lease(step, "lease"))
            if "eq" in step and mine != self._slot(self.lease(step, "eq")):
                raise StepFailed(f"slot {mine} is not the slot of {step['eq']}")
            if "ne" in step and mine == self._slot(self.lease(step, "ne")):
                raise StepFailed(f"slot {mine} is also the slot of {step['ne']}")
            if "below" in step and mine >= step["below"]:
                raise StepFailed(f"slot {mine} is not below {step['below']}")
        elif op == "expect_available":
            name = self.name(step)
            n = self.client(step).semaphore(name, int(step["permits"])).available()
            if "count" in step and n != step["count"]:
                raise StepFailed(f"{n} permits available, expected {step['count']}")
        elif op == "release":
            self.lease(step, "lease").release()
        elif op == "renew":
            lease = self.lease(step, "lease")
            lease.renew(_ms(step.get("ttl_ms")))
            min_remaining = _ms(step.get("min_remaining_ms"))
            if min_remaining is not None and lease.remaining < min_remaining:
                raise StepFailed(f"remaining {lease.remaining:.3f}s < {min_remaining}s after renew")
        elif op == "expect_token":
            a = self.lease(step, "lease").fence
            rel = "gt" if "gt" in step else "eq"
            b = self.lease(step, rel).fence
            if not (a > b if rel == "gt" else a == b):
                raise StepFailed(f"token {a} is not {rel} {b}")
        elif op == "pause":
            time.sleep(step["ms"] / 1000.0)
        elif op == "expect_lost":
            bound = step["within_ms"] / 1000.0
            if not self.lease(step, "lease").lost.wait(bound):
                raise StepFailed(f"lost did not fire within {bound}s")
        elif op == "expect_not_lost":
            lease = self.lease(step, "lease")
            if lease.lost.is_set() or not lease.valid:
                raise StepFailed(f"lease lost={lease.lost.is_set()} valid={lease.valid}")
        elif op == "force_release":
            self.client(step).force_release(self.name(step))
        elif op in ("expect_free", "expect_held"):
            info = self.client(step).inspect(self.name(step))
            if (info.holder is not None) != (op == "expect_held"):
                raise StepFailed(f"{op}: holder is {info.holder!r}")
        elif op in ("fence_write", "fence_read"):
            fence = self.client(step).fence(f"{self.prefix}/{step['resource']}")
            token = self.lease(step, "token_of").fence if "token_of" in step else int(step["token"])
            value = str(step.get("value", "")).encode()
            if op == "fence_write":
                fence.write(token, value)
            else:
                got = fence.read()
                if got != (token, value):
                    raise StepFailed(f"read {got!r}, expected {(token, value)!r}")
        elif op == "proclaim":
            leadership = self.lease(step, "lease")
            assert isinstance(leadership, fencelock.Leadership), f"{step['lease']} is no leadership"
            leadership.proclaim(value_of(step))
        elif op == "resign":
            leadership = self.lease(step, "lease")
            assert isinstance(leadership, fencelock.Leadership), f"{step['lease']} is no leadership"
            leadership.resign()
        elif op == "expect_leader":
            self._check_leader(step, self.client(step).election(self.name(step)).leader())
        elif op == "observe":
            observer = self.client(step).election(self.name(step)).observe()
            self.observers[step["as"]] = Observed(observer)
        elif op == "expect_observed":
            bound = _ms(step.get("within_ms", 10000))
            assert bound is not None
            self._check_leader(step, self.observers[step["observer"]].next(bound))
        else:
            raise AssertionError(f"unknown op {op}")

    def _check_leader(self, step: Dict[str, Any], leader: Optional[fencelock.Leader]) -> None:
        """A leader read or observed against the step: ``none``, or ``value`` and ``term_of`` (a leadership)."""
        if step.get("none"):
            if leader is not None:
                raise StepFailed(f"leader {leader}, expected none")
            return
        if leader is None:
            raise StepFailed("no leader, expected one")
        if "value" in step and leader.value != str(step["value"]).encode():
            raise StepFailed(f"leader value {leader.value!r}, expected {step['value']!r}")
        if "term_of" in step and leader.term != self.lease(step, "term_of").fence:
            want = self.lease(step, "term_of").fence
            raise StepFailed(f"leader term {leader.term}, expected {want}, the term of {step['term_of']}")

    @staticmethod
    def _slot(lease: fencelock.Lease) -> int:
        if lease.slot is None:
            raise StepFailed(f"lease {lease.name} has no slot")
        return lease.slot

    def check_clean(self) -> None:
        """After the scenario: nothing may be left held, locally or on the backend."""
        for lease in self.leases.values():
            try:
                lease.release()
            except fencelock.LockError:
                pass
        checker = fencelock.connect(self.url)
        try:
            for client in self.clients.values():
                if client.local_entries() != 0:
                    raise StepFailed(f"{client.local_entries()} local queue entries left")
            for name, (which, permits) in self.names:
                if which in ("read", "write"):
                    try:
                        lease = checker.rw_lock(name).try_write()
                    except fencelock.Unsupported:
                        continue
                    if lease is None:
                        raise StepFailed(f"read-write lock {name} left held")
                    lease.release()
                elif which == "leader":
                    try:
                        now = checker.election(name).leader()
                    except fencelock.Unsupported:
                        continue
                    if now is not None:
                        raise StepFailed(f"election {name} left a leader of term {now.term}")
                elif which == "permit":
                    try:
                        n = checker.semaphore(name, permits).available()
                    except (fencelock.Unsupported, fencelock.InvalidArgument):
                        continue
                    if n != permits:
                        raise StepFailed(f"semaphore {name} left {n} of {permits} permits")
                else:
                    holder = checker.inspect(name).holder
                    if holder is not None:
                        raise StepFailed(f"{name} left held by {holder!r}")
        finally:
            checker.close()

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def capability_flags(url: str) -> List[str]:
    """The capability flags of the backend at ``url``, by name."""
    client = fencelock.connect(url)
    try:
        caps = client.capability()
    finally:
        client.close()
    return [n for n in FLAGS if getattr(caps, n)]


def run_scenario(sc: Scenario, url: str, unreachable: Optional[str], flags: List[str]) -> str:
    """Runs one scenario; returns "pass" or "skip", raises StepFailed naming the failed step."""
    if any(c in flags for c in sc.unless) or any(c not in flags for c in sc.requires):
        return "skip"
    run = Run(url, unreachable, unique(f"conformance/{sc.name}"))
    try:
        for i, step in enumerate(sc.steps, 1):
            try:
                run.step(step)
            except StepFailed as e:
                raise StepFailed(f"step {i} {json.dumps(step)}: {e}") from None
        run.check_clean()
    finally:
        run.close()
    return "pass"


def served_url(var: str) -> Optional[str]:
    """The URL of a test server from ``var``; ``None`` if unset, unless FENCELOCK_REQUIRE_SERVICES=1."""
    url = os.environ.get(var)
    if url:
        return url
    if os.environ.get("FENCELOCK_REQUIRE_SERVICES") == "1":
        raise RuntimeError(f"{var} is not set but FENCELOCK_REQUIRE_SERVICES=1: start the servers with scripts/services.sh")
    return None
