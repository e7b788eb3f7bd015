"""What the sync and asyncio APIs share: result types and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from . import _native

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


def capability(raw: Tuple[bool, bool, bool, bool]) -> Capability:
    return Capability(*raw)


def lock_info(raw: Tuple[Optional[str], Optional[float], Optional[int]]) -> LockInfo:
    return LockInfo(*raw)
