"""Type stubs of the native module (bindings/python). Private: use the ``fencelock`` package."""

from typing import Any, Awaitable, Callable, List, Optional, Tuple

DEFAULT_TTL: float
MAX_NAME_BYTES: int
MAX_PERMITS: int
MAX_VALUE_BYTES: int

class NativeError(Exception):
    """A fencelock error as ``(code, message)``, raised only before ``fencelock.errors`` registers its factory."""

def retryable(code: int, /) -> bool:
    """Whether an error of kind ``code`` may succeed if retried (core's table)."""
def set_error_factory(
    factory: Callable[[int, str, Optional[str], Optional[str], bool], BaseException], /
) -> None:
    """Registers the function that builds the exception for an error code and message."""

def connect(
    url: Optional[str],
    connect_timeout: Optional[float],
    request_timeout: Optional[float],
    metrics: bool,
    metrics_names: Optional[List[str]],
    all_names: bool,
) -> Client:
    """Connects to ``url`` (the default URL if ``None``)."""

def connect_async(
    url: Optional[str],
    connect_timeout: Optional[float],
    request_timeout: Optional[float],
    metrics: bool,
    metrics_names: Optional[List[str]],
    all_names: bool,
) -> Awaitable[Client]:
    """``connect`` as an awaitable."""

def quiesce() -> None:
    """Waits (at most a second) until no runtime thread is inside Python; registered with atexit."""

def default_url() -> str:
    """The URL ``connect(None)`` uses."""

class Client:
    """A connection to one lock backend."""

    @property
    def id(self) -> str:
        """This client's id."""
    @property
    def url(self) -> str:
        """The backend URL without secrets."""
    def capability(self) -> Tuple[bool, bool, bool, bool, bool, bool, bool]:
        """``(fencing, native_wait, fair, session_bound, rw_lock, semaphore, election)``."""
    def local_entries(self) -> int:
        """Lock names this client holds or queues for locally."""
    def metrics_json(self) -> str:
        """The metrics snapshot as core's JSON."""
    def metrics_families_json(self) -> str:
        """The snapshot as core's metric families, JSON."""
    def lock(
        self, name: str, ttl: float, timeout: Optional[float], watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Lease:
        """Takes ``name``, waiting up to ``timeout`` seconds."""
    def lock_async(
        self, name: str, ttl: float, timeout: Optional[float], watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Awaitable[Lease]:
        """``lock`` as an awaitable."""
    def try_lock(
        self, name: str, ttl: float, watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Optional[Lease]:
        """One attempt."""
    def try_lock_async(
        self, name: str, ttl: float, watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Awaitable[Optional[Lease]]:
        """``try_lock`` as an awaitable."""
    def hold(
        self,
        name: str,
        kind: str,
        permits: int,
        ttl: float,
        timeout: Optional[float],
        watchdog: bool,
        owner: Optional[str],
        fair: Optional[bool],
    ) -> Lease:
        """A hold of ``kind`` (``lock``, ``read``, ``write``, ``permit`` of ``permits``), waiting up to ``timeout``."""
    def hold_async(
        self,
        name: str,
        kind: str,
        permits: int,
        ttl: float,
        timeout: Optional[float],
        watchdog: bool,
        owner: Optional[str],
        fair: Optional[bool],
    ) -> Awaitable[Lease]:
        """``hold`` as an awaitable."""
    def try_hold(
        self, name: str, kind: str, permits: int, ttl: float, watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Optional[Lease]:
        """One attempt at a hold of ``kind``."""
    def try_hold_async(
        self, name: str, kind: str, permits: int, ttl: float, watchdog: bool, owner: Optional[str], fair: Optional[bool]
    ) -> Awaitable[Optional[Lease]]:
        """``try_hold`` as an awaitable."""
    def available(self, name: str, permits: int) -> int:
        """Permits of the semaphore not held now."""
    def available_async(self, name: str, permits: int) -> Awaitable[int]:
        """``available`` as an awaitable."""
    def fence(self, resource: str) -> Fence:
        """The fenced register ``resource``."""
    def election(self, name: str) -> Election:
        """The election ``name``."""
    def inspect(self, name: str) -> Tuple[Optional[str], Optional[float], Optional[int]]:
        """``(holder, remaining seconds, last token)``."""
    def inspect_async(self, name: str) -> Awaitable[Tuple[Optional[str], Optional[float], Optional[int]]]:
        """``inspect`` as an awaitable."""
    def force_release(self, name: str) -> bool:
        """Deletes the record whoever holds it."""
    def force_release_async(self, name: str) -> Awaitable[bool]:
        """``force_release`` as an awaitable."""
    def close(self) -> None:
        """Releases every lease and closes the connections."""
    def close_async(self) -> Awaitable[None]:
        """``close`` as an awaitable."""

class Lease:
    """A held lock."""

    @property
    def name(self) -> str:
        """The lock name."""
    @property
    def fence(self) -> int:
        """The fencing token."""
    @property
    def holder(self) -> str:
        """The holder id."""
    @property
    def slot(self) -> Optional[int]:
        """A permit's slot; ``None`` for other holds."""
    def remaining(self) -> float:
        """Seconds of validity left."""
    def is_valid(self) -> bool:
        """Whether the lease is still ours by our own clock."""
    def is_lost(self) -> bool:
        """Whether the lost signal has fired (core fires it here once the validity has passed without a renewal)."""
    def lost_reason(self) -> Optional[str]:
        """Core's reason for the loss; ``None`` while not lost."""
    def renew(self, ttl: Optional[float]) -> None:
        """Extends the lease."""
    def renew_async(self, ttl: Optional[float]) -> Awaitable[None]:
        """``renew`` as an awaitable."""
    def release(self) -> None:
        """Releases this hold."""
    def release_async(self) -> Awaitable[None]:
        """``release`` as an awaitable."""
    def wait_lost(self, timeout: Optional[float]) -> bool:
        """Blocks until lost, released or ``timeout``; whether it was lost."""
    def wait_lost_async(self) -> Awaitable[bool]:
        """Resolves once the lease is lost or released: whether it was lost."""
    def on_lost(self, callback: Callable[[], Any]) -> None:
        """Calls ``callback()`` once on a runtime thread when the lease is lost."""

class Fence:
    """A fenced register."""

    @property
    def resource(self) -> str:
        """The resource name."""
    def write(self, token: int, value: bytes) -> None:
        """Stores ``value`` if ``token`` is not older than the newest accepted."""
    def write_async(self, token: int, value: bytes) -> Awaitable[None]:
        """``write`` as an awaitable."""
    def read(self) -> Tuple[int, bytes]:
        """``(token, value)``."""
    def read_async(self) -> Awaitable[Tuple[int, bytes]]:
        """``read`` as an awaitable."""

class Election:
    """The election of one name."""

    @property
    def name(self) -> str:
        """The election's name."""
    def campaign(
        self, value: bytes, ttl: float, timeout: Optional[float], watchdog: bool, owner: Optional[str], once: bool
    ) -> Optional[Lease]:
        """Campaigns (one attempt when ``once``); the leadership as a lease whose fence is the term."""
    def campaign_async(
        self, value: bytes, ttl: float, timeout: Optional[float], watchdog: bool, owner: Optional[str], once: bool
    ) -> Awaitable[Optional[Lease]]:
        """``campaign`` as an awaitable."""
    def proclaim(self, leadership: Lease, value: bytes) -> None:
        """Replaces the leadership's value, keeping its term."""
    def proclaim_async(self, leadership: Lease, value: bytes) -> Awaitable[None]:
        """``proclaim`` as an awaitable."""
    def leader(self) -> Optional[Tuple[bytes, int]]:
        """``(value, term)`` of the leader, or ``None``."""
    def leader_async(self) -> Awaitable[Optional[Tuple[bytes, int]]]:
        """``leader`` as an awaitable."""
    def observe(self) -> Observer:
        """An observer of the changes of leader."""

class Observer:
    """The changes of leader of one election."""

    def next(self, timeout: Optional[float]) -> Optional[Tuple[bytes, int]]:
        """The next change, waiting up to ``timeout`` seconds; ``Timeout`` if none comes."""
    def next_async(self) -> Awaitable[Optional[Tuple[bytes, int]]]:
        """``next`` as an awaitable."""
