"""fencelock for asyncio: the API of :mod:`fencelock` with coroutines.

``connect``, ``lock``, ``try_lock``, ``renew``, ``release`` and the fence's ``write``/``read`` are ``async def``, so
they work with ``create_task``, ``wait_for``, ``asyncio.timeout`` and ``TaskGroup``. Cancelling an awaiting ``lock``
leaves no lock and no queue entry behind::

    import fencelock.aio

    client = await fencelock.aio.connect("redis://127.0.0.1:6379")
    async with await client.lock("orders", timeout=5.0) as lease:
        await client.fence("orders-table").write(lease.fence, b"new state")

    async with client.mutex("orders"):      # or: acquire and release in one ``async with``
        ...

    async with await client.rw_lock("catalog").read() as lease:       # read-write locks and semaphores alike
        ...

    async with await client.election("publisher").campaign(b"me") as leadership:   # elections too
        async for leader in client.election("publisher").observe():
            ...

The default reentrancy owner is the current task. The event loop never blocks: the work runs on fencelock's own
threads.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Iterable, Optional, Tuple, Type, Union

from . import _native
from ._common import DEFAULT_TTL, Capability, LockInfo
from ._common import ClientView, FenceView, LeaseView, LostSignalView, MutexView, RwLockView, SemaphoreView
from ._common import ElectionView, Leader, LeadershipView
from ._common import leader, lock_info, permits_arg, value_arg, wait_limit
from .errors import Closed, LockError, Timeout
from .metrics import connect_args

__all__ = [
    "Client",
    "Election",
    "Fence",
    "Leadership",
    "Lease",
    "LostSignal",
    "Mutex",
    "Observer",
    "RwLock",
    "Semaphore",
    "connect",
    "task_owner",
]


def task_owner() -> str:
    """The default reentrancy owner in asyncio: the current task, ``task-<id(asyncio.current_task())>``."""
    return f"task-{id(asyncio.current_task())}"


async def connect(
    url: Optional[str] = None,
    *,
    connect_timeout: Optional[float] = None,
    request_timeout: Optional[float] = None,
    metrics: bool = True,
    metrics_names: Union[bool, Iterable[str]] = False,
) -> Client:
    """Connects to the backend ``url`` names; see :func:`fencelock.connect`."""
    args = connect_args(metrics, metrics_names)
    return Client(await _native.connect_async(url, connect_timeout, request_timeout, *args))


class Client(ClientView):
    """A connection to one lock backend (asyncio). Use :func:`connect` to make one; ``async with`` closes it."""

    __slots__ = ()

    async def lock(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """Takes ``name``, waiting up to ``timeout`` seconds (``None``: forever); see :meth:`fencelock.Client.lock`.

        The default owner is the current task. Raises :class:`~fencelock.Timeout` if the lock stays taken.
        """
        owner = task_owner() if owner is None else owner
        return Lease(await self._native.lock_async(name, ttl, timeout, watchdog, owner, fair))

    async def try_lock(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Optional[Lease]:
        """One attempt to take ``name``: the lease, or ``None`` if another holds it."""
        native = await self._native.try_lock_async(name, ttl, watchdog, task_owner() if owner is None else owner, fair)
        return None if native is None else Lease(native)

    def mutex(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Mutex:
        """A :class:`Mutex` on ``name``: ``async with client.mutex("x"):`` takes and releases it."""
        return Mutex(self, name, ttl, watchdog, owner, fair)

    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``: many readers or one writer (see :class:`RwLock`)."""
        return RwLock(self, name)

    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The semaphore ``name`` of ``permits`` leased permits (see :class:`Semaphore`)."""
        return Semaphore(self, name, permits)

    def election(self, name: str) -> Election:
        """The election ``name`` (see :class:`Election`)."""
        return Election(self, name)

    async def _hold(
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
        owner = task_owner() if owner is None else owner
        permits = permits_arg(name, permits)
        return Lease(await self._native.hold_async(name, kind, permits, ttl, timeout, watchdog, owner, fair))

    async def _try_hold(
        self,
        name: str,
        kind: str,
        permits: int,
        ttl: float,
        watchdog: bool,
        owner: Optional[str],
        fair: Optional[bool],
    ) -> Optional[Lease]:
        owner = task_owner() if owner is None else owner
        permits = permits_arg(name, permits)
        native = await self._native.try_hold_async(name, kind, permits, ttl, watchdog, owner, fair)
        return None if native is None else Lease(native)

    def fence(self, resource: str) -> Fence:
        """The fenced register ``resource``, stored in this client's backend."""
        return Fence(self._native.fence(resource))

    async def inspect(self, name: str) -> LockInfo:
        """Who holds ``name`` per the backend, for how long, and the last token handed out."""
        return lock_info(await self._native.inspect_async(name))

    async def force_release(self, name: str) -> bool:
        """Deletes the record of ``name`` whoever holds it (an operator's tool); whether there was one."""
        return await self._native.force_release_async(name)

    async def close(self) -> None:
        """Releases every lease this client holds and closes its connections."""
        await self._native.close_async()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()


class LostSignal(LostSignalView):
    """Set when a lease is lost, like an :class:`asyncio.Event` you can only read (``lease.lost``); ``reason`` says
    why, in the core's words."""

    __slots__ = ()

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the lease is lost or released, or ``timeout`` seconds pass; whether it was lost."""
        try:
            return await asyncio.wait_for(self._native.wait_lost_async(), timeout)
        except asyncio.TimeoutError:
            return False


class Lease(LeaseView):
    """A held lock (asyncio): ``async with await client.lock("x") as lease:`` releases it at the end."""

    __slots__ = ()
    _lost_signal = LostSignal

    async def renew(self, ttl: Optional[float] = None) -> None:
        """Extends the lease to ``ttl`` seconds from now (its current TTL if ``None``)."""
        await self._native.renew_async(ttl)

    async def release(self) -> None:
        """Releases this hold; see :meth:`fencelock.Lease.release`."""
        self._released = True
        await self._native.release_async()

    def on_lost(self, callback: Callable[[], Any]) -> None:
        """Calls ``callback()`` once, on the running event loop, when the lease is lost; never if it is released first.

        The callback is kept until the lease is lost or released.
        """
        loop = asyncio.get_running_loop()

        def schedule() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(callback)

        self._native.on_lost(schedule)

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._released:
            return
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except LockError:
            pass



class Fence(FenceView):
    """A fenced register (asyncio); see :class:`fencelock.Fence`."""

    __slots__ = ()

    async def write(self, token: int, value: bytes) -> None:
        """Stores ``value`` if ``token`` ≥ the highest token accepted so far; :class:`~fencelock.Fenced` if older."""
        await self._native.write_async(self._checked(token), bytes(value))

    async def read(self) -> Tuple[int, bytes]:
        """``(token, value)``: the highest accepted token and its value; ``(0, b"")`` if never written."""
        return await self._native.read_async()


class RwLock(RwLockView):
    """A read-write lock (asyncio); see :class:`fencelock.RwLock`. ``async with await rw.read() as lease:``.

    The default owner is the current task.
    """

    __slots__ = ()
    _client: Client

    async def read(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """A read hold, waiting up to ``timeout`` seconds (``None``: forever) while a writer holds or waits."""
        return await self._client._hold(self._name, "read", 0, ttl, timeout, watchdog, owner, fair)

    async def try_read(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at a read hold: the lease, or ``None`` while a writer holds or waits."""
        return await self._client._try_hold(self._name, "read", 0, ttl, watchdog, owner, fair)

    async def write(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """The write hold, waiting up to ``timeout`` seconds (``None``: forever) for readers and another writer."""
        return await self._client._hold(self._name, "write", 0, ttl, timeout, watchdog, owner, fair)

    async def try_write(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at the write hold: the lease, or ``None`` while anyone holds."""
        return await self._client._try_hold(self._name, "write", 0, ttl, watchdog, owner, fair)


class Semaphore(SemaphoreView):
    """A semaphore of leased permits (asyncio); see :class:`fencelock.Semaphore`.
    ``async with await sem.acquire() as permit:``."""

    __slots__ = ()
    _client: Client

    async def acquire(
        self,
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
        fair: Optional[bool] = None,
    ) -> Lease:
        """A permit, waiting up to ``timeout`` seconds (``None``: forever) while all are held."""
        return await self._client._hold(self._name, "permit", self._permits, ttl, timeout, watchdog, owner, fair)

    async def try_acquire(
        self, ttl: float = DEFAULT_TTL, watchdog: bool = True, owner: Optional[str] = None, fair: Optional[bool] = None
    ) -> Optional[Lease]:
        """One attempt at a permit: the lease, or ``None`` while all are held."""
        return await self._client._try_hold(self._name, "permit", self._permits, ttl, watchdog, owner, fair)

    async def available(self) -> int:
        """Permits not held now, per the backend."""
        return await self._client._native.available_async(self._name, permits_arg(self._name, self._permits))


class Leadership(LeadershipView, Lease):
    """A leadership (asyncio); see :class:`fencelock.Leadership`. ``async with await election.campaign(v) as l:``
    resigns at the end."""

    __slots__ = ("_election",)

    def __init__(self, native: _native.Lease, election: Election) -> None:
        super().__init__(native)
        self._election = election

    async def proclaim(self, value: Union[bytes, str]) -> None:
        """Replaces the leader's value, keeping the term; see :meth:`fencelock.Leadership.proclaim`."""
        await self._election._native.proclaim_async(self._native, value_arg(self._election.name, value))

    async def resign(self) -> None:
        """Gives the leadership up (the same as :meth:`release`)."""
        await self.release()

    async def __aenter__(self) -> Leadership:
        return self


class Observer:
    """The changes of leader of one election (asyncio): ``async for leader in election.observe():``, each a
    :class:`~fencelock.Leader` or ``None`` while nobody leads; see :class:`fencelock.Observer`. Bound a wait with
    ``asyncio.wait_for(observer.get(), t)``; cancelling it loses no change."""

    __slots__ = ("_native",)

    def __init__(self, native: _native.Observer) -> None:
        self._native = native

    async def get(self) -> Optional[Leader]:
        """The next change. A failed read of the backend raises its error; the next call goes on."""
        return leader(await self._native.next_async())

    def __aiter__(self) -> AsyncIterator[Optional[Leader]]:
        return self

    async def __anext__(self) -> Optional[Leader]:
        """The next change; the iteration ends when the client is closed."""
        try:
            return await self.get()
        except Closed:
            raise StopAsyncIteration from None


class Election(ElectionView):
    """An election (asyncio); see :class:`fencelock.Election`. The default owner is the current task."""

    __slots__ = ()

    async def campaign(
        self,
        value: Union[bytes, str],
        ttl: float = DEFAULT_TTL,
        timeout: Optional[float] = None,
        watchdog: bool = True,
        owner: Optional[str] = None,
    ) -> Leadership:
        """Campaigns with ``value``, waiting up to ``timeout`` seconds (``None``: forever) while another leads.

        Cancelling it leaves no candidate behind. Raises :class:`~fencelock.Timeout` if another still leads.
        """
        owner = task_owner() if owner is None else owner
        native = await self._native.campaign_async(value_arg(self.name, value), ttl, timeout, watchdog, owner, False)
        assert native is not None, "a waiting campaign leads or raises"
        return Leadership(native, self)

    async def try_campaign(
        self,
        value: Union[bytes, str],
        ttl: float = DEFAULT_TTL,
        watchdog: bool = True,
        owner: Optional[str] = None,
    ) -> Optional[Leadership]:
        """One attempt: the leadership, or ``None`` while another leads."""
        owner = task_owner() if owner is None else owner
        native = await self._native.campaign_async(value_arg(self.name, value), ttl, None, watchdog, owner, True)
        return None if native is None else Leadership(native, self)

    async def leader(self) -> Optional[Leader]:
        """The current leader's value and term, or ``None`` if nobody leads."""
        return leader(await self._native.leader_async())

    def observe(self) -> Observer:
        """An :class:`Observer` of every change of leader, from the current one on."""
        return Observer(self._native.observe())


class Mutex(MutexView):
    """``async with client.mutex("x"):`` — takes the lock on entry and releases it on exit.

    Also ``await acquire(blocking=True, timeout=None)`` → bool, ``await release()``, ``await locked()``. Reentrant
    per owner (the current task by default).
    """

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes the lock; whether it did. ``blocking=False``: one attempt. ``timeout`` seconds; ``None`` or ``-1``
        (as in :class:`fencelock.Mutex`): wait without limit."""
        limit = wait_limit(blocking, timeout)
        if not blocking:
            lease = await self._client.try_lock(self._name, self._ttl, self._watchdog, self._owner, self._fair)
            if lease is None:
                return False
        else:
            try:
                lease = await self._client.lock(self._name, self._ttl, limit, self._watchdog, self._owner, self._fair)
            except Timeout:
                return False
        return self._push(lease)

    async def release(self) -> None:
        """Releases the most recent hold. :class:`RuntimeError` if this mutex holds nothing."""
        await self._pop().release()

    async def locked(self) -> bool:
        """Whether anyone holds the name, per the backend."""
        return (await self._client.inspect(self._name)).holder is not None

    async def __aenter__(self) -> Mutex:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release()
