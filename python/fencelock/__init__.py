"""fencelock: distributed locks with fencing tokens, over SQLite, PostgreSQL, Redis, Redlock, etcd and ZooKeeper.

One Rust core implements every algorithm; this package is its Python face (DESIGN.md §4)::

    import fencelock

    client = fencelock.connect("redis://127.0.0.1:6379")   # None: $FENCELOCK_URL, else sqlite:fencelock.db
    with client.lock("orders", ttl=10.0, timeout=5.0) as lease:
        client.fence("orders-table").write(lease.fence, b"new state")   # a stale holder's write is rejected

Every blocking call releases the GIL while it waits and can be interrupted with Ctrl-C. The same API for asyncio is
:mod:`fencelock.aio`. Errors are :class:`LockError` subclasses (:mod:`fencelock.errors`).
"""

from __future__ import annotations

import atexit
import threading
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple, Type, Union

from . import _native
from ._common import DEFAULT_TTL, Capability, LockInfo
from ._common import ClientView, FenceView, LeaseView, LostSignalView, MutexView, RwLockView, SemaphoreView
from ._common import ElectionView, Leader, LeadershipView
from ._common import leader, lock_info, permits_arg, value_arg, wait_limit
from .metrics import MetricsSnapshot, connect_args
from .errors import (
    Cancelled,
    Closed,
    ErrorKind,
    Fenced,
    Internal,
    InvalidArgument,
    LockError,
    LockLost,
    NotHeld,
    Timeout,
    Unavailable,
    Unsupported,
)

# A runtime thread may still be posting the last asyncio result when the program ends: let it finish first.
atexit.register(_native.quiesce)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TTL",
    "Capability",
    "Cancelled",
    "Client",
    "Closed",
    "Election",
    "ErrorKind",
    "Fence",
    "Fenced",
    "Internal",
    "InvalidArgument",
    "Leader",
    "Leadership",
    "Lease",
    "LockError",
    "LockInfo",
    "LockLost",
    "LostSignal",
    "MetricsSnapshot",
    "Mutex",
    "NotHeld",
    "Observer",
    "RwLock",
    "Semaphore",
    "Timeout",
    "Unavailable",
    "Unsupported",
    "connect",
    "default_url",
    "thread_owner",
]


def thread_owner() -> str:
    """The default reentrancy owner of sync calls: the current thread, ``thread-<threading.get_ident()>``."""
    return f"thread-{threading.get_ident()}"


def default_url() -> str:
    """The URL :func:`connect` uses when given none: ``$FENCELOCK_URL``, else ``sqlite:fencelock.db``."""
    return _native.default_url()


def connect(
    url: Optional[str] = None,
    *,
    connect_timeout: Optional[float] = None,
    request_timeout: Optional[float] = None,
    metrics: bool = True,
    metrics_names: Union[bool, Iterable[str]] = False,
) -> Client:
    """Connects to the backend ``url`` names (``sqlite:PATH``, ``redis://…``, ``etcd://…``, …; see the README).

    With no URL: ``$FENCELOCK_URL``, else the embedded SQLite file ``fencelock.db`` in the working directory.
    ``connect_timeout`` and ``request_timeout`` are seconds (default 5 each). Raises :class:`InvalidArgument` for a
    bad URL and :class:`Unavailable` if the backend cannot be reached.

    ``metrics``: record :meth:`Client.metrics` (default on). ``metrics_names``: which lock names get series of their
    own — ``False`` none (names are unbounded), ``True`` all (capped at 1000 plus ``_other``), or an iterable of names.
    """
    return Client(_native.connect(url, connect_timeout, request_timeout, *connect_args(metrics, metrics_names)))


class Client(ClientView):
    """A connection to one lock backend. Thread-safe: share one per process. Use :func:`connect` to make one.

    Usable as a context manager that closes it.
    """

    __slots__ = ()

    def lock(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """Takes the lock ``name``, waiting up to ``timeout`` seconds (``None``: forever) while another holds it.

        ``ttl``: seconds the backend keeps the lease without a renewal. ``watchdog``: renew every ttl/3 until
        released. ``owner``: reentrancy key; by default the current thread, so a thread that locks a name it already
        holds on this client gets the same grant (and token) back, and the lock is free after its last release.
        ``fair``: wait in arrival order among all clients (``True``) or not (``False``) where the backend offers
        both (Redis); ``None``: the backend's default.
        Raises :class:`Timeout` if the lock stays taken. Use the lease as a context manager to release it.
        """
        owner = thread_owner() if owner is None else owner
        return Lease(self._native.lock(name, ttl, timeout, watchdog, owner, fair))

    def try_lock(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Optional[Lease]:
        """One attempt to take ``name``: the lease, or ``None`` if another holds it. Options as for :meth:`lock`."""
        native = self._native.try_lock(name, ttl, watchdog, thread_owner() if owner is None else owner, fair)
        return None if native is None else Lease(native)

    def mutex(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Mutex:
        """A :class:`Mutex` on ``name`` with the interface of :class:`threading.Lock` (``with mutex:``)."""
        return Mutex(self, name, ttl, watchdog, owner, fair)

    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``: many readers or one writer (see :class:`RwLock`)."""
        return RwLock(self, name)

    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The semaphore ``name`` of ``permits`` leased permits (see :class:`Semaphore`). Every client of the name must
        use the same number; the calls check it (:class:`InvalidArgument` naming both)."""
        return Semaphore(self, name, permits)

    def election(self, name: str) -> Election:
        """The election ``name``: at most one leader at a time, each with a higher term (see :class:`Election`)."""
        return Election(self, name)

    def _hold(
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
        owner = thread_owner() if owner is None else owner
        permits = permits_arg(name, permits)
        return Lease(self._native.hold(name, kind, permits, ttl, timeout, watchdog, owner, fair))

    def _try_hold(
        self,
        name: str,
        kind: str,
        permits: int,
        ttl: float,
        watchdog: bool,
        owner: Optional[str],
        fair: Optional[bool],
    ) -> Optional[Lease]:
        owner = thread_owner() if owner is None else owner
        native = self._native.try_hold(name, kind, permits_arg(name, permits), ttl, watchdog, owner, fair)
        return None if native is None else Lease(native)

    def fence(self, resource: str) -> Fence:
        """The fenced register ``resource``, stored in this client's backend."""
        return Fence(self._native.fence(resource))

    def inspect(self, name: str) -> LockInfo:
        """Who holds ``name`` per the backend, for how long, and the last token handed out."""
        return lock_info(self._native.inspect(name))

    def force_release(self, name: str) -> bool:
        """Deletes the record of ``name`` whoever holds it (an operator's tool); whether there was one.

        The holder's lease is lost at its next renewal; fencing tokens keep rising.
        """
        return self._native.force_release(name)

    def close(self) -> None:
        """Releases every lease this client holds and closes its connections. Later calls raise :class:`Closed`."""
        self._native.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class LostSignal(LostSignalView):
    """Set when a lease is lost, like a :class:`threading.Event` you can only read (``lease.lost``); ``reason`` says
    why, in the core's words."""

    __slots__ = ()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lease is lost or released, or ``timeout`` seconds pass; whether it was lost.

        Returns ``False`` once a lease is released before it was lost. Releases the GIL; Ctrl-C interrupts it.
        """
        return self._native.wait_lost(timeout)


class Lease(LeaseView):
    """A held lock: its fencing token, renewal, release and loss signal.

    A context manager that releases it: ``with client.lock("x") as lease:``. Any thread may renew or release it.
    """

    __slots__ = ()
    _lost_signal = LostSignal

    def renew(self, ttl: Optional[float] = None) -> None:
        """Extends the lease to ``ttl`` seconds from now (its current TTL if ``None``).

        Raises :class:`LockLost` if it is no longer ours, :class:`NotHeld` after release.
        """
        self._native.renew(ttl)

    def release(self) -> None:
        """Releases this hold (the lock is free once every reentrant hold is released).

        Raises :class:`NotHeld` if already released, :class:`LockLost` if the lock was lost while held: the critical
        section was then not protected.
        """
        self._released = True
        self._native.release()

    def on_lost(self, callback: Callable[[], Any]) -> None:
        """Calls ``callback()`` once, on a new thread, when the lease is lost; never if it is released first.

        The callback is kept until the lease is lost or released.
        """
        thread_name = f"fencelock-lost-{self.name}"  # not `self`: a pending callback must not keep the lease alive

        def start() -> None:
            threading.Thread(target=callback, name=thread_name, daemon=True).start()

        self._native.on_lost(start)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._released:
            return
        if exc_type is None:
            self.release()
            return
        # The body's exception is what the caller needs to see; a failed release must not replace it.
        try:
            self.release()
        except LockError:
            pass



class Fence(FenceView):
    """A fenced register on the resource side: it rejects writes whose token is older than one it accepted."""

    __slots__ = ()

    def write(self, token: int, value: bytes) -> None:
        """Stores ``value`` if ``token`` ≥ the highest token accepted so far (raising it); :class:`Fenced` if older."""
        self._native.write(self._checked(token), bytes(value))

    def read(self) -> Tuple[int, bytes]:
        """``(token, value)``: the highest accepted token and its value; ``(0, b"")`` if never written."""
        return self._native.read()


class RwLock(RwLockView):
    """A read-write lock: many readers or one writer. Use :meth:`Client.rw_lock` to make one.

    Each hold is a :class:`Lease` like a lock's (TTL, watchdog, lost signal, reentrancy per owner), and a context
    manager that releases it: ``with client.rw_lock("catalog").read() as lease:``. A waiting writer blocks new
    readers. An owner holding the write lock may take the read lock too (a downgrade); one holding the read lock that
    asks for the write lock gets :class:`InvalidArgument` (an upgrade), never a deadlock. A write hold, and each run
    of overlapping read holds, has a fencing token of its own; readers of one run share it. A backend without
    read-write locks (``capability().rw_lock`` false) raises :class:`Unsupported`.
    """

    __slots__ = ()
    _client: Client

    def read(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """A read hold, waiting up to ``timeout`` seconds (``None``: forever) while a writer holds or waits.

        Options as for :meth:`Client.lock`. Raises :class:`Timeout` if it stays taken.
        """
        return self._client._hold(self._name, "read", 0, ttl, timeout, watchdog, owner, fair)

    def try_read(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at a read hold: the lease, or ``None`` while a writer holds or waits."""
        return self._client._try_hold(self._name, "read", 0, ttl, watchdog, owner, fair)

    def write(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """The write hold, waiting up to ``timeout`` seconds (``None``: forever) for readers and another writer.

        Options as for :meth:`Client.lock`. Raises :class:`Timeout` if it stays taken, :class:`InvalidArgument` if
        the owner holds the read lock.
        """
        return self._client._hold(self._name, "write", 0, ttl, timeout, watchdog, owner, fair)

    def try_write(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at the write hold: the lease, or ``None`` while anyone holds."""
        return self._client._try_hold(self._name, "write", 0, ttl, watchdog, owner, fair)


class Semaphore(SemaphoreView):
    """At most ``permits`` holds at once across every client. Use :meth:`Client.semaphore` to make one.

    Each permit is a :class:`Lease` (TTL, watchdog, lost signal; a crashed holder's permit comes back after its TTL)
    and a context manager that releases it: ``with client.semaphore("gpus", 4).acquire() as permit:``. A permit
    occupies a slot, ``permit.slot`` in ``0…permits-1``, whose token rises with every grant of that slot, so a
    resource partitioned by slot is fenced like a mutex. A backend without semaphores raises :class:`Unsupported`.
    """

    __slots__ = ()
    _client: Client

    def acquire(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """A permit, waiting up to ``timeout`` seconds (``None``: forever) while all are held.

        Options as for :meth:`Client.lock`. Raises :class:`Timeout` if none frees up, :class:`InvalidArgument` for 0
        or more than 65,536 permits or a number other clients of the name do not use.
        """
        return self._client._hold(self._name, "permit", self._permits, ttl, timeout, watchdog, owner, fair)

    def try_acquire(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at a permit: the lease, or ``None`` while all are held."""
        return self._client._try_hold(self._name, "permit", self._permits, ttl, watchdog, owner, fair)

    def available(self) -> int:
        """Permits not held now, per the backend."""
        return self._client._native.available(self._name, permits_arg(self._name, self._permits))


class Leadership(LeadershipView, Lease):
    """This client's leadership of an election: a :class:`Lease` (TTL, watchdog, ``lost``, ``release``) whose
    ``fence`` is its ``term``. A context manager that resigns: ``with election.campaign(b"me") as leadership:``.
    """

    __slots__ = ("_election",)

    def __init__(self, native: _native.Lease, election: Election) -> None:
        super().__init__(native)
        self._election = election

    def proclaim(self, value: Union[bytes, str]) -> None:
        """Replaces the value other clients see as the leader's, keeping the term. :class:`LockLost` if this
        leadership was lost, :class:`NotHeld` after it resigned."""
        self._election._native.proclaim(self._native, value_arg(self._election.name, value))

    def resign(self) -> None:
        """Gives the leadership up (the same as :meth:`release`): the next candidate leads, with a higher term."""
        self.release()

    def __enter__(self) -> Leadership:
        return self


class Observer:
    """The changes of leader of one election, in order: iterate it (``for leader in election.observe():``), or take
    one change with :meth:`get`. Each is a :class:`Leader`, or ``None`` while nobody leads. It starts with the current
    state, never reports a lower term after a higher one, and keeps going across reconnects.
    """

    __slots__ = ("_native",)

    def __init__(self, native: _native.Observer) -> None:
        self._native = native

    def get(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next change, waiting up to ``timeout`` seconds (``None``: no limit); :class:`Timeout` if none comes.

        Releases the GIL; Ctrl-C interrupts it. A failed read of the backend raises its error; the next call goes on.
        """
        return leader(self._native.next(timeout))

    def __iter__(self) -> Iterator[Optional[Leader]]:
        return self

    def __next__(self) -> Optional[Leader]:
        """The next change; the iteration ends when the client is closed."""
        try:
            return self.get()
        except Closed:
            raise StopIteration from None


class Election(ElectionView):
    """An election: at most one leader at a time among all clients of the name, each with a term (a fencing token)
    higher than every earlier leader's, and a value the others read. Use :meth:`Client.election` to make one.

    A backend without elections (``capability().election`` false) raises :class:`Unsupported`.
    """

    __slots__ = ()

    def campaign(
        self,
        value: Union[bytes, str],
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
    ) -> Leadership:
        """Campaigns with ``value`` (bytes, or text as UTF-8; at most 64 KiB), waiting up to ``timeout`` seconds
        (``None``: forever) while another leads. Options as for :meth:`Client.lock`. Raises :class:`Timeout` if
        another still leads; a campaign that times out or is interrupted leaves no candidate behind.
        """
        owner = thread_owner() if owner is None else owner
        native = self._native.campaign(value_arg(self.name, value), ttl, timeout, watchdog, owner, False)
        assert native is not None, "a waiting campaign leads or raises"
        return Leadership(native, self)

    def try_campaign(
        self,
        value: Union[bytes, str],
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
    ) -> Optional[Leadership]:
        """One attempt: the leadership, or ``None`` while another leads."""
        owner = thread_owner() if owner is None else owner
        native = self._native.campaign(value_arg(self.name, value), ttl, None, watchdog, owner, True)
        return None if native is None else Leadership(native, self)

    def leader(self) -> Optional[Leader]:
        """The current leader's value and term, or ``None`` if nobody leads."""
        return leader(self._native.leader())

    def observe(self) -> Observer:
        """An :class:`Observer` of every change of leader, from the current one on."""
        return Observer(self._native.observe())


class Mutex(MutexView):
    """A lock with the interface of :class:`threading.Lock`, for code written for one: ``with mutex:``,
    ``acquire(blocking=True, timeout=-1)``, ``release()``, ``locked()``.

    Unlike :class:`threading.Lock` it is reentrant per owner (the current thread by default), like every fencelock
    lock, and ``locked()`` asks the backend whether anyone holds the name.
    """

    def acquire(self, blocking: bool = True, timeout: Optional[float] = -1) -> bool:
        """Takes the lock; whether it did. ``blocking=False``: one attempt. ``timeout`` seconds; ``-1`` or ``None``
        (as in :mod:`fencelock.aio`): wait without limit."""
        limit = wait_limit(blocking, timeout)
        if not blocking:
            lease = self._client.try_lock(self._name, self._ttl, self._watchdog, self._owner, self._fair)
            if lease is None:
                return False
        else:
            try:
                lease = self._client.lock(self._name, self._ttl, limit, self._watchdog, self._owner, self._fair)
            except Timeout:
                return False
        return self._push(lease)

    def release(self) -> None:
        """Releases the most recent hold. :class:`RuntimeError` if this mutex holds nothing, as threading does."""
        self._pop().release()

    def locked(self) -> bool:
        """Whether anyone holds the name, per the backend."""
        return self._client.inspect(self._name).holder is not None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()
