"""What the sync and asyncio APIs share: result types and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from . import _native
from . import _native as native

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
        """What the backend can do (fencing, native wake-ups, fair order, session-bound leases)."""
        return Capability(*self._native.capability())


class LeaseView:
    """The read-only side of a lease, shared by :class:`fencelock.Lease` and :class:`fencelock.aio.Lease`."""

    __slots__ = ("_native",)
    _native: native.Lease

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


def lock_info(raw: Tuple[Optional[str], Optional[float], Optional[int]]) -> LockInfo:
    return LockInfo(*raw)
