"""The shape of :meth:`fencelock.Client.metrics`: core's snapshot as plain dicts, typed for ``mypy --strict``.

Counters count from the client's creation. Durations are seconds. Lock names appear under ``names`` only for the
names opted in with ``connect(metrics_names=…)``. :mod:`fencelock.prometheus` exports the same figures.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Tuple, TypedDict

from .errors import InvalidArgument

__all__ = [
    "AcquireWait",
    "Bucket",
    "FenceWrites",
    "Histogram",
    "Lost",
    "MetricsSnapshot",
    "NameSnapshot",
    "OpOutcomes",
    "Renewals",
]


class Bucket(TypedDict):
    le: Optional[float]
    """Upper bound in seconds; ``None`` is +Inf."""
    count: int
    """Observations at or below ``le`` (cumulative)."""


class Histogram(TypedDict):
    count: int
    sum: float
    buckets: List[Bucket]


AcquireWait = TypedDict(
    "AcquireWait",
    {"acquired": Histogram, "busy": Histogram, "timeout": Histogram, "cancelled": Histogram, "error": Histogram},
)
"""Time spent in ``lock``/``try_lock`` by outcome (``busy``: a ``try_lock`` that found the lock held)."""


class Renewals(TypedDict):
    ok: int
    failed: int


class Lost(TypedDict):
    expired: int
    taken: int
    unreachable: int


class FenceWrites(TypedDict):
    ok: int
    refused: int
    error: int


class OpOutcomes(TypedDict):
    ok: Histogram
    """The backend answered (refusals included)."""
    error: Histogram
    """It did not."""


class NameSnapshot(TypedDict):
    acquire_wait: AcquireWait
    hold_time: Histogram
    active_leases: int
    lost: int
    local_queue_depth: int


class MetricsSnapshot(TypedDict):
    backend: str
    """The backend's scheme (``redis``, ``sqlite``, …)."""
    enabled: bool
    acquire_wait: AcquireWait
    hold_time: Histogram
    active_leases: int
    renewals: Renewals
    lost: Lost
    fence_writes: FenceWrites
    local_queue_depth: int
    backend_ops: Dict[str, OpOutcomes]
    """By operation: ``acquire``, ``renew``, ``release``, ``force_release``, ``inspect``, ``fence_write``,
    ``fence_read``."""
    names: Dict[str, NameSnapshot]


def snapshot(raw_json: str) -> MetricsSnapshot:
    snap: MetricsSnapshot = json.loads(raw_json)
    return snap


def families(raw_json: str) -> List[Dict[str, Any]]:
    """Core's metric families (name, help, type, samples), the one mapping every exporter loops over."""
    fams: List[Dict[str, Any]] = json.loads(raw_json)
    return fams


def connect_args(metrics: object, metrics_names: object) -> Tuple[bool, Optional[List[str]], bool]:
    """``connect``'s metrics options as the native module takes them: ``(on, names or None, all names)``."""
    if not isinstance(metrics, bool):
        raise TypeError(f"metrics must be a bool, not {type(metrics).__name__}")
    if isinstance(metrics_names, bool):
        return metrics, None, metrics_names
    # A str is an iterable of characters: never what was meant.
    if isinstance(metrics_names, (str, bytes)) or not isinstance(metrics_names, Iterable):
        raise TypeError(f"metrics_names must be a bool or an iterable of lock names, not {type(metrics_names).__name__}")
    names = list(metrics_names)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"metrics_names must hold lock names (str), found {type(n).__name__}")
        if not n:
            raise InvalidArgument("metrics_names: a lock name must not be empty")
    return metrics, names, False
