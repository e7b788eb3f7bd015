"""Read-write locks and semaphores in both Python APIs: context managers, the asyncio variant, the error mapping
(upgrade and bad permits: InvalidArgument; a backend without the kind: Unsupported), slots, and the README's
examples. The shared scenarios (test_conformance.py) hold the semantics; these hold the Python idioms."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

import fencelock
import fencelock.aio


@pytest.fixture
def memory_url() -> str:
    """A fresh in-process backend, which has read-write locks and semaphores."""
    return f"memory://kinds-{uuid.uuid4().hex}"


@pytest.fixture
def mem(memory_url: str) -> Iterator[fencelock.Client]:
    c = fencelock.connect(memory_url)
    yield c
    c.close()


def lacking(kind: str, tmp_path: Path) -> List[str]:
    """URLs of backends whose capability says they lack `kind` (``rw_lock`` or ``semaphore``): SQLite, and the served
    ones that do today."""
    candidates = [f"sqlite:{tmp_path / 'locks.db'}"]
    for var in ("FENCELOCK_TEST_REDIS", "FENCELOCK_TEST_ZK", "FENCELOCK_TEST_REDLOCK", "FENCELOCK_TEST_POSTGRES"):
        if os.environ.get(var):
            candidates.append(os.environ[var])
    out = []
    for url in candidates:
        with fencelock.connect(url) as c:
            if not getattr(c.capability(), kind):
                out.append(url)
    return out


def test_capability_names_the_kinds(mem: fencelock.Client, client: fencelock.Client) -> None:
    caps = mem.capability()
    assert caps.rw_lock and caps.semaphore
    assert isinstance(client.capability().rw_lock, bool)


def test_read_and_write_are_context_managers(memory_url: str, name: str) -> None:
    a, b = fencelock.connect(memory_url), fencelock.connect(memory_url)
    rw, other = a.rw_lock(name), b.rw_lock(name)
    assert rw.name == name and repr(rw) == f"<fencelock.RwLock {name!r}>"
    with rw.read(ttl=5.0, timeout=1.0) as r1:
        assert r1.name == name and r1.slot is None and r1.valid
        assert r1.holder.startswith(a.id + ":thread-")
        r2 = other.try_read()
        assert r2 is not None and r2.fence == r1.fence, "readers of one run share a token"
        assert other.try_write(owner="another") is None  # (this thread's own try_write would be an upgrade)
        r2.release()
    assert not r1.valid, "released at the end of the with block"
    with other.write(timeout=1.0, owner="job") as w:
        assert w.fence > r1.fence
        assert rw.try_read() is None and rw.try_write() is None
        with pytest.raises(fencelock.Timeout):
            rw.read(timeout=0.1)
    w2 = rw.try_write()
    assert w2 is not None and w2.fence > w.fence
    w2.release()
    assert a.local_entries() == 0 and b.local_entries() == 0
    a.close()
    b.close()


def test_a_body_exception_still_releases_the_hold(mem: fencelock.Client, name: str) -> None:
    with pytest.raises(KeyError):
        with mem.rw_lock(name).write():
            raise KeyError("boom")
    with pytest.raises(KeyError):
        with mem.semaphore(name, 1).acquire():
            raise KeyError("boom")
    lease = mem.rw_lock(name).try_write()
    assert lease is not None, "the write lock was left held"
    lease.release()
    assert mem.semaphore(name, 1).available() == 1


def test_downgrade_and_refused_upgrade(mem: fencelock.Client, name: str) -> None:
    rw = mem.rw_lock(name)
    with rw.write() as w:  # the default owner: this thread
        with rw.read(timeout=1.0) as r:  # a downgrade: the writer may read
            assert r.fence > w.fence
    with rw.read():
        started = time.monotonic()
        with pytest.raises(fencelock.InvalidArgument) as info:
            rw.write(timeout=2.0)
        assert time.monotonic() - started < 1.0, "refused at once, not a deadlock"
        assert "upgrade" in str(info.value) and isinstance(info.value, ValueError)
        assert info.value.lock == name


def test_readers_in_threads_and_a_waiting_writer(memory_url: str, name: str) -> None:
    a, b = fencelock.connect(memory_url), fencelock.connect(memory_url)
    r = a.rw_lock(name).read()
    got: List[fencelock.Lease] = []
    writer = threading.Thread(target=lambda: got.append(b.rw_lock(name).write(timeout=10.0)))
    writer.start()
    deadline = time.monotonic() + 5
    while True:  # the waiting writer blocks new readers
        reader = a.rw_lock(name).try_read(owner="new-reader")
        if reader is None:
            break
        reader.release()
        assert time.monotonic() < deadline, "the writer did not start waiting"
        time.sleep(0.01)
    assert not got, "the writer waits for the reader"
    r.release()
    writer.join(5)
    assert got and got[0].fence > r.fence
    got[0].release()
    a.close()
    b.close()


def test_semaphore_permits_slots_and_available(memory_url: str, name: str) -> None:
    a, b = fencelock.connect(memory_url), fencelock.connect(memory_url)
    sem = a.semaphore(name, 2)
    assert (sem.name, sem.permits) == (name, 2)
    assert repr(sem) == f"<fencelock.Semaphore {name!r} permits=2>"
    assert sem.available() == 2
    with sem.acquire(ttl=5.0, timeout=1.0) as p1:
        p2 = b.semaphore(name, 2).try_acquire()
        assert p2 is not None
        assert {p1.slot, p2.slot} == {0, 1}
        assert sem.available() == 0
        # (this thread would re-enter its own permit: the reentrancy of every hold)
        assert b.semaphore(name, 2).try_acquire(owner="third") is None
        with pytest.raises(fencelock.Timeout):
            b.semaphore(name, 2).acquire(timeout=0.1, owner="third")
        p2.release()
    assert sem.available() == 2
    p3 = b.semaphore(name, 2).acquire(timeout=1.0)
    assert p3.slot in (0, 1)
    p3.release()
    a.close()
    b.close()


def test_bad_permits_are_invalid_argument(mem: fencelock.Client, name: str) -> None:
    held = mem.semaphore(name, 2).acquire()
    for permits, word in ((0, "0"), (-1, "-1"), (65537, "65537"), (2**70, str(2**70)), (3, "3")):
        sem = mem.semaphore(name, permits)
        for call in (sem.acquire, sem.try_acquire, sem.available):
            with pytest.raises(fencelock.InvalidArgument) as info:
                call()
            assert word in str(info.value), info.value
            assert isinstance(info.value, ValueError) and info.value.kind is fencelock.ErrorKind.INVALID_ARGUMENT
    held.release()
    assert mem.semaphore(name, 2).available() == 2


@pytest.mark.parametrize("kind", ["rw_lock", "semaphore"])
def test_a_backend_without_the_kind_is_unsupported(kind: str, name: str, tmp_path: Path) -> None:
    urls = lacking(kind, tmp_path)
    if not urls:
        pytest.skip(f"every backend here claims {kind}")
    for url in urls:
        with fencelock.connect(url) as c:
            if kind == "rw_lock":
                rw = c.rw_lock(name)
                calls = [rw.read, rw.write, rw.try_read, rw.try_write]
                word = "read-write"
            else:
                sem = c.semaphore(name, 2)
                calls = [sem.acquire, sem.try_acquire, sem.available]
                word = "semaphore"
            for call in calls:
                with pytest.raises(fencelock.Unsupported) as info:
                    call()
                assert word in str(info.value), info.value
            assert c.local_entries() == 0
            with c.lock(name):  # the mutex on the same name is untouched
                pass


def test_asyncio_read_write_and_permits(memory_url: str, name: str) -> None:
    async def main() -> None:
        async with await fencelock.aio.connect(memory_url) as a, await fencelock.aio.connect(memory_url) as b:
            rw = a.rw_lock(name)
            assert repr(rw) == f"<fencelock.aio.RwLock {name!r}>"
            async with await rw.read(ttl=5.0) as r1:
                assert r1.holder.startswith(a.id + ":task-")
                r2 = await b.rw_lock(name).try_read()
                assert r2 is not None and r2.fence == r1.fence
                assert await b.rw_lock(name).try_write(owner="another") is None
                await r2.release()
            assert not r1.valid
            async with await b.rw_lock(name).write(timeout=1.0) as w:
                assert w.fence > r1.fence and await rw.try_read() is None
                with pytest.raises(fencelock.Timeout):
                    await rw.read(timeout=0.1)
            w2 = await rw.try_write()
            assert w2 is not None
            await w2.release()

            sem = a.semaphore(name, 2)
            assert await sem.available() == 2
            async with await sem.acquire(timeout=1.0) as p1:
                p2 = await b.semaphore(name, 2).try_acquire()
                assert p2 is not None and {p1.slot, p2.slot} == {0, 1}
                assert await sem.available() == 0 and await sem.try_acquire(owner="third") is None
                await p2.release()
            assert await sem.available() == 2
            with pytest.raises(fencelock.InvalidArgument):
                await a.semaphore(name, 0).acquire()

    asyncio.run(main())


def test_asyncio_a_cancelled_wait_leaves_nothing(memory_url: str, name: str) -> None:
    async def main() -> None:
        async with await fencelock.aio.connect(memory_url) as a, await fencelock.aio.connect(memory_url) as b:
            w = await a.rw_lock(name).write()
            p = await a.semaphore(name + "-s", 1).acquire()
            for acquire in (b.rw_lock(name).read(), b.semaphore(name + "-s", 1).acquire()):
                task = asyncio.ensure_future(acquire)
                await asyncio.sleep(0.1)
                assert not task.done()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            await w.release()
            await p.release()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while b.local_entries() != 0:
                assert loop.time() < deadline, "the cancelled waits left local queue entries"
                await asyncio.sleep(0.02)
            w2: Optional[fencelock.aio.Lease] = await b.rw_lock(name).try_write()
            assert w2 is not None
            await w2.release()
            assert await b.semaphore(name + "-s", 1).available() == 1

    asyncio.run(main())


def test_readme_python_example(memory_url: str) -> None:
    """The README's Python read-write lock and semaphore example, as written there."""
    client = fencelock.connect(memory_url)

    rw = client.rw_lock("catalog")
    with rw.read(timeout=5.0) as lease:  # many readers at once; try_read() makes one attempt
        assert lease.valid
    with rw.write(ttl=10.0) as lease:  # alone; a waiting writer blocks new readers
        client.fence("catalog-table").write(lease.fence, b"v2")

    pool = client.semaphore("gpu-pool", 4)  # at most 4 holds across every client
    with pool.acquire(timeout=30.0) as permit:  # try_acquire(); pool.available() counts the free ones
        client.fence(f"gpu-{permit.slot}").write(permit.fence, b"job 17")  # slot 0..3, fenced per slot
        assert pool.available() == 3

    assert client.fence("catalog-table").read()[1] == b"v2"
    assert permit.slot is not None and client.fence(f"gpu-{permit.slot}").read()[1] == b"job 17"

    async def main() -> None:
        aclient = await fencelock.aio.connect(memory_url)
        async with await aclient.rw_lock("catalog").read() as lease:
            assert lease.valid
        async with await aclient.semaphore("gpu-pool", 4).acquire() as permit:
            assert permit.slot is not None
        await aclient.close()

    asyncio.run(main())
    client.close()
