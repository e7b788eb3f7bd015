"""Elections in both Python APIs: ``with election.campaign(v) as leadership:``, ``for leader in election.observe():``,
``async for`` in asyncio, cancellation, and bad input. The shared scenarios (test_conformance.py) hold the semantics
on every backend; these hold the Python idioms, on SQLite and on Redis when it is served."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

import fencelock
import fencelock.aio


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'locks.db'}"
    served = os.environ.get("FENCELOCK_TEST_REDIS")
    if not served:
        pytest.skip("FENCELOCK_TEST_REDIS is not set (run through scripts/test.sh)")
    return served


@pytest.fixture
def pair(url: str) -> Iterator[List[fencelock.Client]]:
    a, b = fencelock.connect(url), fencelock.connect(url)
    yield [a, b]
    a.close()
    b.close()


def test_capability_names_elections(pair: List[fencelock.Client]) -> None:
    assert pair[0].capability().election is True


def test_campaign_is_a_context_manager_that_resigns(pair: List[fencelock.Client], name: str) -> None:
    a, b = pair
    election, other = a.election(name), b.election(name)
    assert election.name == name and repr(election) == f"<fencelock.Election {name!r}>"
    assert other.leader() is None
    with election.campaign("alpha", ttl=5.0, timeout=2.0) as leadership:
        assert isinstance(leadership, fencelock.Lease)
        assert leadership.term == leadership.fence and leadership.valid and leadership.election is election
        assert repr(leadership) == f"<fencelock.Leadership {name!r} term={leadership.term}>"
        assert other.try_campaign(b"beta") is None
        now = other.leader()
        assert now == fencelock.Leader(b"alpha", leadership.term) and now.text == "alpha"
        leadership.proclaim(bytearray(b"gamma"))
        assert other.leader() == fencelock.Leader(b"gamma", leadership.term)
        first = leadership.term
    assert other.leader() is None
    with pytest.raises(fencelock.NotHeld):
        leadership.proclaim(b"late")
    # The next leader's term is higher, and resign() is the same as leaving the block.
    successor = other.campaign(b"beta", ttl=5.0, timeout=2.0)
    assert successor.term > first
    successor.resign()
    assert election.leader() is None


def test_observe_iterates_every_change_and_ends_with_the_client(pair: List[fencelock.Client], name: str) -> None:
    a, b = pair
    seen: List[Optional[fencelock.Leader]] = []
    changed = threading.Condition()

    def watch() -> None:
        for leader in b.election(name).observe():
            with changed:
                seen.append(leader)
                changed.notify_all()

    def until(count: int) -> None:
        with changed:
            assert changed.wait_for(lambda: len(seen) >= count, timeout=10.0), seen

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    until(1)
    leadership = a.election(name).campaign(b"one", ttl=5.0)
    until(2)
    leadership.proclaim(b"two")
    until(3)
    leadership.resign()
    until(4)
    term = leadership.term
    assert seen == [None, fencelock.Leader(b"one", term), fencelock.Leader(b"two", term), None]
    b.close()  # the iteration ends: the for loop returns
    watcher.join(10.0)
    assert not watcher.is_alive()


def test_observer_get_times_out_with_timeout(pair: List[fencelock.Client], name: str) -> None:
    observer = pair[0].election(name).observe()
    assert observer.get(5.0) is None
    with pytest.raises(fencelock.Timeout) as caught:
        observer.get(0.1)
    assert name in str(caught.value)


def test_a_timed_out_campaign_leaves_no_candidate(pair: List[fencelock.Client], name: str) -> None:
    a, b = pair
    holder = a.election(name).campaign(b"holder", ttl=5.0)
    with pytest.raises(fencelock.Timeout):
        b.election(name).campaign(b"waiter", ttl=5.0, timeout=0.2)
    holder.resign()
    assert a.election(name).leader() is None
    assert b.local_entries() == 0  # the sync campaign cleaned up before it raised


def test_bad_values_are_refused_by_name(client: fencelock.Client, name: str) -> None:
    election = client.election(name)
    with pytest.raises(TypeError, match=name):
        election.campaign(42)  # type: ignore[arg-type]
    with pytest.raises(fencelock.InvalidArgument, match="65536"):
        election.campaign(b"v" * (fencelock._native.MAX_VALUE_BYTES + 1), timeout=1.0)
    with pytest.raises(fencelock.InvalidArgument, match="ttl"):
        election.campaign(b"v", ttl=-1.0)
    leadership = election.campaign(b"v")
    with pytest.raises(fencelock.InvalidArgument):
        leadership.proclaim(b"v" * (fencelock._native.MAX_VALUE_BYTES + 1))
    leadership.resign()
    assert election.leader() is None  # nothing left behind by the refused calls


async def until(what: str, done: Callable[[], bool]) -> None:
    """Waits, for at most 5 s, until ``done()``."""
    deadline = asyncio.get_running_loop().time() + 5
    while not done():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


def test_asyncio_campaign_observe_and_cancel(url: str, name: str) -> None:
    async def main() -> None:
        async with await fencelock.aio.connect(url) as a, await fencelock.aio.connect(url) as b:
            election = a.election(name)
            observer = b.election(name).observe()
            assert await asyncio.wait_for(observer.get(), 5.0) is None
            async with await election.campaign(b"one", ttl=5.0) as leadership:
                assert isinstance(leadership, fencelock.aio.Leadership)
                assert await asyncio.wait_for(observer.get(), 5.0) == fencelock.Leader(b"one", leadership.term)
                # A campaign cancelled while it waits leaves no candidate behind.
                waiting = asyncio.ensure_future(b.election(name).campaign(b"two"))
                await until("the campaign never queued", lambda: b.local_entries() > 0)
                assert not waiting.done()
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                await leadership.proclaim("uno")
                assert await b.election(name).leader() == fencelock.Leader(b"uno", leadership.term)
                assert await asyncio.wait_for(observer.get(), 5.0) == fencelock.Leader(b"uno", leadership.term)
            assert await b.election(name).leader() is None
            await until("the cancelled campaign left a local queue entry", lambda: b.local_entries() == 0)
            seen = []
            async for leader in observer:
                seen.append(leader)
                if leader is None:
                    break
            assert seen == [None]  # the resign, the next change after the proclaimed value
            assert await b.election(name).try_campaign(b"two") is not None

    asyncio.run(main())
