"""fencelock.aio: coroutines, async with, cancellation leaves no lock, task-owner reentrancy."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Coroutine, List, Optional, TypeVar

import pytest

import fencelock
import fencelock.aio

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def queued(client: fencelock.aio.Client, within: float = 5.0) -> None:
    """Returns once a lock() of `client` is inside its wait loop (the name has a local queue entry)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while client.local_entries() == 0:
        assert loop.time() < deadline, f"lock() did not start waiting within {within}s"
        await asyncio.sleep(0.005)


async def free_soon(client: fencelock.aio.Client, name: str, within: float = 5.0) -> bool:
    """Whether `name` is free (and nothing is queued locally) within `within` seconds: cleanups run in the background."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if (await client.inspect(name)).holder is None and client.local_entries() == 0:
            return True
        await asyncio.sleep(0.02)
    return False


def test_async_with_and_fence(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        async with await fencelock.aio.connect(sqlite_url) as client:
            async with await client.lock(name, ttl=5.0) as lease:
                assert lease.fence > 0 and lease.valid
                assert lease.holder.startswith(client.id + ":task-")
                fence = client.fence(name)
                assert await fence.read() == (0, b"")
                await fence.write(lease.fence, b"v")
                assert await fence.read() == (lease.fence, b"v")
                with pytest.raises(fencelock.Fenced):
                    await fence.write(lease.fence - 1, b"stale")
                await lease.renew(10.0)
            assert (await client.inspect(name)).holder is None
            async with client.mutex(name) as m:
                assert await m.locked() and m.fence is not None
            assert not await m.locked()

    run(main())


def test_errors_from_coroutines(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        a, b = await fencelock.aio.connect(sqlite_url), await fencelock.aio.connect(sqlite_url)
        held = await a.lock(name)
        assert await b.try_lock(name) is None
        with pytest.raises(fencelock.Timeout):
            await b.lock(name, timeout=0.1)
        with pytest.raises(fencelock.InvalidArgument):
            await b.lock("")
        with pytest.raises(fencelock.Unavailable):
            await fencelock.aio.connect("redis://127.0.0.1:1", connect_timeout=2.0)
        await held.release()
        with pytest.raises(fencelock.NotHeld):
            await held.release()

    run(main())


def test_cancelled_lock_leaves_no_lock(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        a, b = await fencelock.aio.connect(sqlite_url), await fencelock.aio.connect(sqlite_url)
        held = await b.lock(name)
        task = asyncio.create_task(a.lock(name))
        await queued(a)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.lock(name), 0.1)
        await held.release()
        assert await free_soon(a, name)
        # Nothing is stuck in a's local queue: it takes the lock at once.
        again = await a.lock(name, timeout=1.0)
        await again.release()

    run(main())


def test_cancel_racing_the_grant_leaves_no_lock(name: str) -> None:
    async def main() -> None:
        url = f"memory://{name}"
        a, b = await fencelock.aio.connect(url), await fencelock.aio.connect(url)
        for i in range(20):
            held = await b.lock(name)
            task = asyncio.create_task(a.lock(name))
            await queued(a)
            await held.release()
            await asyncio.sleep(0.0005 * i)  # the cancel lands at a different point of the hand-off each time
            task.cancel()
            try:
                lease = await task
                await lease.release()
            except asyncio.CancelledError:
                pass
            assert await free_soon(a, name), f"iteration {i}: left held"

    run(main())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout and TaskGroup are 3.11+")
def test_asyncio_timeout_and_taskgroup(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        a, b = await fencelock.aio.connect(sqlite_url), await fencelock.aio.connect(sqlite_url)
        held = await b.lock(name)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):  # type: ignore[attr-defined]
                await a.lock(name)
        await held.release()
        assert await free_soon(a, name)
        order: List[int] = []

        async def worker(i: int) -> None:
            async with await a.lock(name, timeout=10.0):
                order.append(i)
                await asyncio.sleep(0.01)

        async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined]
            for i in range(4):
                tg.create_task(worker(i))
        assert sorted(order) == [0, 1, 2, 3]

    run(main())


def test_task_owner_reentrancy(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        client = await fencelock.aio.connect(sqlite_url)
        outer = await client.lock(name)
        inner = await client.lock(name, timeout=0)  # same task
        assert inner.fence == outer.fence

        async def other() -> Optional[fencelock.aio.Lease]:
            return await client.try_lock(name)

        assert await asyncio.create_task(other()) is None  # another task is another owner
        await inner.release()
        assert (await client.inspect(name)).holder is not None
        await outer.release()
        assert (await client.inspect(name)).holder is None

    run(main())


def test_lost_on_the_event_loop(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        a, b = await fencelock.aio.connect(sqlite_url), await fencelock.aio.connect(sqlite_url)
        lease = await a.lock(name, ttl=0.6)
        seen = asyncio.Event()
        threads: List[int] = []

        def on_lost() -> None:
            threads.append(threading.get_ident())
            seen.set()

        lease.on_lost(on_lost)
        assert not await lease.lost.wait(0.05)
        await b.force_release(name)
        assert await lease.lost.wait(5.0)
        await asyncio.wait_for(seen.wait(), 5.0)
        assert threads == [threading.get_ident()]  # called on the loop's thread
        assert lease.lost.reason
        with pytest.raises(fencelock.LockLost) as info:
            await lease.renew()
        assert info.value.lock == name
        # A released lease's signal ends without a loss instead of hanging.
        other = await a.lock(name + "-2")
        await other.release()
        assert await asyncio.wait_for(other.lost.wait(), 5.0) is False
        # The mutex takes -1 as the sync one does: wait without limit.
        m = a.mutex(name + "-3")
        assert await m.acquire(timeout=-1)
        await m.release()

    run(main())


def test_event_loop_keeps_running_while_waiting(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        a, b = await fencelock.aio.connect(sqlite_url), await fencelock.aio.connect(sqlite_url)
        held = await b.lock(name)
        ticks = [0]

        async def tick() -> None:
            while True:
                ticks[0] += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        with pytest.raises(fencelock.Timeout):
            await a.lock(name, timeout=0.5)
        ticker.cancel()
        assert ticks[0] >= 20
        await held.release()

    run(main())



def test_fair_reaches_the_backend(sqlite_url: str, name: str) -> None:
    async def main() -> None:
        # The memory backend's waiters race; SQLite queues its waiters and serves both orders.
        async with await fencelock.aio.connect(sqlite_url) as client:
            await (await client.lock(name, fair=True)).release()
        async with await fencelock.aio.connect(f"memory://{name}") as client:
            with pytest.raises(fencelock.Unsupported):
                await client.lock(name, fair=True)
            with pytest.raises(fencelock.Unsupported):
                await client.try_lock(name, fair=True)
            with pytest.raises(fencelock.Unsupported):
                await client.mutex(name, fair=True).acquire()
            lease = await client.try_lock(name, fair=False)
            assert lease is not None
            await lease.release()

    run(main())
