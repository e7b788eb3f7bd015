"""What the sync and asyncio APIs share: result types, defaults, and every part of the client, lease, lost signal,
fence and mutex that does not wait (the waiting methods differ only in ``await``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from . import _native
from . import _native as native
from .errors import InvalidArgument
from .metrics import MetricsSnapshot, snapshot

DEFAULT_TTL: float = _native.DEFAULT_TTL
"""Lease time to live when none is given, in seconds (30)."""


@dataclass(frozen=True)
class Capability:
    """What a backend can do, so callers branch on capabilities rather than on backend names."""

    fencing: bool
    """Grants carry fencing tokens that rise per lock name."""
    native_wait: bool
    """Waiters are woken by the backend (pub/sub, watch, LISTEN) rather than by polling."""
    fair: bool
    """Waiters across clients are served in arrival order."""
    session_bound: bool
    """Leases are bound to a session (ZooKeeper) rather than to a per-lock TTL."""
    rw_lock: bool = False
    """Read-write locks (``client.rw_lock(name)``); without them those calls raise :class:`~fencelock.Unsupported`."""
    semaphore: bool = False
    """Semaphores of leased permits (``client.semaphore(name, permits)``); else :class:`~fencelock.Unsupported`."""
    election: bool = False
    """Leader elections (``client.election(name)``); else :class:`~fencelock.Unsupported`."""


@dataclass(frozen=True)
class Leader:
    """An election's leader, as :meth:`Election.leader` and :meth:`Election.observe` report it."""

    value: bytes
    """The value it campaigned with, or last proclaimed."""
    term: int
    """Its term: the fencing token of its leadership, higher for every new leader."""

    @property
    def text(self) -> str:
        """The value as UTF-8 text."""
        return self.value.decode()


@dataclass(frozen=True)
class LockInfo:
    """Who holds a lock, per the backend."""

    holder: Optional[str]
    """The holder id (``<client uuid>:<owner>``), or ``None`` if the lock is free."""
    remaining: Optional[float]
    """Seconds left on the holder's record, if known."""
    last_token: Optional[int]
    """The last fencing token handed out for the name, if any."""


class ClientView:
    """What :class:`fencelock.Client` and :class:`fencelock.aio.Client` share: the handle and its plain facts."""

    __slots__ = ("_native",)

    def __init__(self, handle: native.Client) -> None:
        self._native = handle

    @property
    def id(self) -> str:
        """This client's id: the first half of every holder id it writes (``<client id>:<owner>``)."""
        return self._native.id

    @property
    def url(self) -> str:
        """The backend URL, without secrets."""
        return self._native.url

    def capability(self) -> Capability:
        """What the backend can do (fencing, native wake-ups, fair order, session-bound leases, read-write locks,
        semaphores, elections)."""
        return Capability(*self._native.capability())

    def local_entries(self) -> int:
        """Lock names this client holds or queues for locally (0 when idle)."""
        return self._native.local_entries()

    def metrics(self) -> MetricsSnapshot:
        """This client's metrics now, as plain dicts (see :mod:`fencelock.metrics`); reading them never waits."""
        return snapshot(self._native.metrics_json())

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Client {self.url}>"


class LostSignalView:
    """What the sync and asyncio lost signals share: ``is_set()``, core's ``reason``, the repr."""

    __slots__ = ("_native",)

    def __init__(self, native: native.Lease) -> None:
        self._native = native

    def is_set(self) -> bool:
        """Whether the lease has been lost; a validity passed without a renewal counts, and fires the signal now."""
        return self._native.is_lost()

    @property
    def reason(self) -> Optional[str]:
        """Why the lease was lost, as the core reports it; ``None`` while it is not lost."""
        return self._native.lost_reason()

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.LostSignal {'set' if self.is_set() else 'unset'}>"


class LeaseView:
    """The read-only side of a lease, shared by :class:`fencelock.Lease` and :class:`fencelock.aio.Lease`."""

    __slots__ = ("_native", "_released", "lost")
    _native: native.Lease
    _lost_signal: Any = LostSignalView

    def __init__(self, native: native.Lease) -> None:
        self._native = native
        self._released = False
        self.lost = self._lost_signal(native)
        """Set when the lease is lost: expired, taken, or not renewed in time (see ``LostSignal``)."""

    @property
    def name(self) -> str:
        """The lock name."""
        return self._native.name

    @property
    def fence(self) -> int:
        """The fencing token: larger than every earlier grant's on this lock and backend. Readable after release."""
        return self._native.fence

    @property
    def holder(self) -> str:
        """The holder id written to the backend, ``<client id>:<owner>``."""
        return self._native.holder

    @property
    def slot(self) -> Optional[int]:
        """A semaphore permit's slot, ``0`` to ``permits - 1`` (its token is the slot's own counter); ``None`` for a
        mutex or read-write lock hold."""
        return self._native.slot

    @property
    def remaining(self) -> float:
        """Seconds left before the lease's validity ends unless renewed (the watchdog renews it)."""
        return self._native.remaining()

    @property
    def valid(self) -> bool:
        """Whether the lease is still ours by our own clock: not released, not lost, validity not passed."""
        return self._native.is_valid()

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Lease {self.name!r} fence={self.fence}>"


class FenceView:
    """The name of a fenced register, shared by :class:`fencelock.Fence` and :class:`fencelock.aio.Fence`."""

    __slots__ = ("_native",)

    def __init__(self, handle: native.Fence) -> None:
        self._native = handle

    @property
    def resource(self) -> str:
        """The resource name."""
        return self._native.resource

    def _checked(self, token: int) -> int:
        if token < 0:
            raise InvalidArgument(f"fence {self.resource!r}: token must be ≥ 0, got {token}")
        return token

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Fence {self.resource!r}>"


def wait_limit(blocking: bool, timeout: Optional[float]) -> Optional[float]:
    """The lock timeout of ``Mutex.acquire(blocking, timeout)``, the same in both APIs: ``-1`` (``threading``'s
    spelling) and ``None`` (``asyncio``'s) both mean *wait without limit*; a non-blocking call takes neither."""
    if timeout is None or timeout == -1:
        return None
    if not blocking:
        raise ValueError("can't specify a timeout for a non-blocking call")
    if timeout < 0:
        raise ValueError("timeout value must be a non-negative number")
    return timeout


class MutexView:
    """What the sync and asyncio mutexes share: the options, the stack of holds, ``fence`` and the repr."""

    def __init__(
        self, client: Any, name: str, ttl: float, watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> None:
        self._client = client
        self._fair = fair
        self._name = name
        self._ttl = ttl
        self._watchdog = watchdog
        self._owner = owner
        self._leases: List[Any] = []
        self._guard = threading.Lock()

    @property
    def name(self) -> str:
        """The lock name."""
        return self._name

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of the current hold, if this mutex holds the lock."""
        with self._guard:
            return self._leases[-1].fence if self._leases else None

    def _push(self, lease: Any) -> bool:
        with self._guard:
            self._leases.append(lease)
        return True

    def _pop(self) -> Any:
        """The most recent hold, taken off the stack. :class:`RuntimeError` if there is none, as threading says."""
        with self._guard:
            if not self._leases:
                raise RuntimeError("release unlocked lock")
            return self._leases.pop()

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Mutex {self._name!r}>"


class RwLockView:
    """What the sync and asyncio read-write locks share: the client, the name and the repr."""

    __slots__ = ("_client", "_name")

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._name = name

    @property
    def name(self) -> str:
        """The lock name."""
        return self._name

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.RwLock {self._name!r}>"


class SemaphoreView:
    """What the sync and asyncio semaphores share: the client, the name, the number of permits and the repr."""

    __slots__ = ("_client", "_name", "_permits")

    def __init__(self, client: Any, name: str, permits: int) -> None:
        self._client = client
        self._name = name
        self._permits = permits

    @property
    def name(self) -> str:
        """The semaphore's name."""
        return self._name

    @property
    def permits(self) -> int:
        """The number of permits it was opened with (every client of the name must use the same)."""
        return self._permits

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Semaphore {self._name!r} permits={self._permits}>"


def permits_arg(name: str, permits: int) -> int:
    """``permits`` for the native call: an integer the core then checks (1 to 65,536); one too large for the native
    call is :class:`~fencelock.InvalidArgument` naming it, like every other bad number of permits."""
    if isinstance(permits, int) and not -(2**63) <= permits < 2**63:
        message = f"a semaphore has 1 to {_native.MAX_PERMITS} permits, not {permits}"
        raise InvalidArgument(f"lock {name!r}: {message}", lock=name)
    return permits


def lock_info(raw: Tuple[Optional[str], Optional[float], Optional[int]]) -> LockInfo:
    return LockInfo(*raw)


def leader(raw: Optional[Tuple[bytes, int]]) -> Optional[Leader]:
    return None if raw is None else Leader(*raw)


def value_arg(election: str, value: Any) -> bytes:
    """A campaign's or proclamation's value as bytes: ``bytes``-like as is, ``str`` as UTF-8 (the core checks its
    length)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"election {election!r}: a value is bytes or str, not {type(value).__name__}")


class ElectionView:
    """What the sync and asyncio elections share: the client, the name and the repr."""

    __slots__ = ("_client", "_native")
    _native: native.Election

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._native = client._native.election(name)

    @property
    def name(self) -> str:
        """The election's name."""
        return self._native.name

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Election {self.name!r}>"


class LeadershipView:
    """What the sync and asyncio leaderships add to their leases: the term and the election."""

    __slots__ = ()
    _election: Any
    _native: native.Lease

    @property
    def term(self) -> int:
        """The term: this leadership's fencing token (the same as ``fence``), higher than every earlier leader's."""
        return self._native.fence

    @property
    def election(self) -> Any:
        """The election this leadership leads."""
        return self._election

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Leadership {self._election.name!r} term={self.term}>"
