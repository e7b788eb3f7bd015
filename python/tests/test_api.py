"""The sync API's Python idioms: context managers, exception classes, fences, the mutex, thread-owner reentrancy,
the lost signal and callbacks."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import fencelock
from fencelock import ErrorKind


def test_lock_as_context_manager_releases(client: fencelock.Client, name: str) -> None:
    with client.lock(name, ttl=5.0) as lease:
        assert lease.name == name
        assert lease.fence > 0
        assert lease.valid and 0 < lease.remaining <= 5.0
        assert lease.holder.startswith(client.id + ":thread-")
        assert client.inspect(name).holder == lease.holder
    assert client.inspect(name).holder is None
    assert lease.fence > 0  # readable after release
    assert client.local_entries() == 0


def test_body_exception_propagates_and_releases(client: fencelock.Client, name: str) -> None:
    with pytest.raises(KeyError):
        with client.lock(name):
            raise KeyError("boom")
    assert client.inspect(name).holder is None


def test_try_lock_busy_and_tokens_rise(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    first = a.lock(name)
    assert b.try_lock(name) is None
    with pytest.raises(fencelock.Timeout) as info:
        b.lock(name, timeout=0.2)
    assert info.value.kind is ErrorKind.TIMEOUT and info.value.retryable
    assert isinstance(info.value, TimeoutError)
    first.release()
    second = b.try_lock(name)
    assert second is not None and second.fence > first.fence
    second.release()


def test_release_twice_is_not_held(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name)
    lease.release()
    with pytest.raises(fencelock.NotHeld) as info:
        lease.release()
    assert info.value.kind is ErrorKind.NOT_HELD and not info.value.retryable
    with pytest.raises(fencelock.NotHeld):
        lease.renew()


def test_manual_release_inside_with(client: fencelock.Client, name: str) -> None:
    with client.lock(name) as lease:
        lease.release()  # the with block does not release it again
    assert client.inspect(name).holder is None


def test_renew_extends(client: fencelock.Client, name: str) -> None:
    with client.lock(name, ttl=1.0, watchdog=False) as lease:
        lease.renew(20.0)
        assert lease.remaining > 15.0


def test_error_classes_and_table() -> None:
    pairs = {
        fencelock.Timeout: (ErrorKind.TIMEOUT, TimeoutError),
        fencelock.Unavailable: (ErrorKind.UNAVAILABLE, ConnectionError),
        fencelock.InvalidArgument: (ErrorKind.INVALID_ARGUMENT, ValueError),
        fencelock.LockLost: (ErrorKind.LOCK_LOST, fencelock.LockError),
        fencelock.NotHeld: (ErrorKind.NOT_HELD, fencelock.LockError),
        fencelock.Fenced: (ErrorKind.FENCED, fencelock.LockError),
        fencelock.Unsupported: (ErrorKind.UNSUPPORTED, fencelock.LockError),
        fencelock.Closed: (ErrorKind.CLOSED, fencelock.LockError),
        fencelock.Cancelled: (ErrorKind.CANCELLED, fencelock.LockError),
        fencelock.Internal: (ErrorKind.INTERNAL, fencelock.LockError),
    }
    assert [k.code for k in ErrorKind] == list(range(1, 11))
    for cls, (kind, also) in pairs.items():
        err = cls("msg")
        assert isinstance(err, fencelock.LockError) and isinstance(err, also)
        assert err.kind is kind and err.retryable == (kind in (ErrorKind.TIMEOUT, ErrorKind.UNAVAILABLE))
        assert str(err) == "msg"
    from fencelock.errors import _from_code

    for kind in ErrorKind:
        assert type(_from_code(kind.code, "m")).kind is kind
    assert isinstance(_from_code(99, "m"), fencelock.Internal)


@pytest.mark.parametrize("bad", ["", "a\0b", "n" * 513])
def test_bad_names_are_invalid_argument(client: fencelock.Client, bad: str) -> None:
    with pytest.raises(fencelock.InvalidArgument):
        client.lock(bad)
    with pytest.raises(fencelock.InvalidArgument):
        client.try_lock(bad)


@pytest.mark.parametrize("ttl", [0.0, -1.0, float("nan"), 86400.001])
def test_bad_ttls_are_invalid_argument(client: fencelock.Client, name: str, ttl: float) -> None:
    with pytest.raises(fencelock.InvalidArgument, match="ttl"):
        client.lock(name, ttl=ttl)


def test_bad_urls() -> None:
    with pytest.raises(fencelock.InvalidArgument):
        fencelock.connect("bogus://nowhere")
    with pytest.raises(fencelock.Unavailable) as info:
        fencelock.connect("redis://127.0.0.1:1", connect_timeout=2.0)
    assert isinstance(info.value, ConnectionError) and info.value.retryable


def test_secrets_stay_out_of_repr_url_and_exceptions(sqlite_url: str) -> None:
    with fencelock.connect(f"{sqlite_url}?key=pysecret1") as c:
        assert c.url.endswith("?key=***"), c.url
        assert "pysecret1" not in repr(c) and "pysecret1" not in c.url
    for url, secret in [
        ("etcd://root:pa/ss@127.0.0.1:1", "pa/ss"),
        ("zk://user:zkpassW@127.0.0.1:1", "zkpassW"),
        ("redlock://u:p@ss@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "p@ss"),
    ]:
        with pytest.raises(fencelock.LockError) as info:
            fencelock.connect(url, connect_timeout=0.3)
        shown = [str(info.value), repr(info.value), info.value.message, str(info.value.backend)]
        assert not any(secret in s for s in shown), shown
        assert "127.0.0.1" in info.value.message, info.value.message


def test_closed_client(sqlite_url: str, name: str) -> None:
    with fencelock.connect(sqlite_url) as c:
        lease = c.lock(name)
    with pytest.raises(fencelock.Closed):
        c.lock(name)
    assert fencelock.connect(sqlite_url).inspect(name).holder is None
    with pytest.raises(fencelock.Closed):
        lease.renew()
    with pytest.raises(fencelock.Closed):
        lease.release()


def test_fence_write_read(client: fencelock.Client, name: str) -> None:
    fence = client.fence(name)
    assert fence.read() == (0, b"")
    old = client.lock("L-" + name)
    old.release()
    new = client.lock("L-" + name)
    fence.write(new.fence, b"new")
    with pytest.raises(fencelock.Fenced) as info:
        fence.write(old.fence, b"stale")
    assert info.value.kind is ErrorKind.FENCED
    assert fence.read() == (new.fence, b"new")
    fence.write(new.fence, bytearray(b"again"))  # bytes-like
    assert fence.read() == (new.fence, b"again")
    with pytest.raises(fencelock.InvalidArgument):
        fence.write(-1, b"x")
    new.release()


def test_thread_owner_reentrancy(sqlite_url: str, name: str) -> None:
    client = fencelock.connect(sqlite_url)
    outer = client.lock(name)
    inner = client.lock(name, timeout=0)  # same thread: reenters at once
    assert inner.fence == outer.fence
    seen: List[object] = []
    t = threading.Thread(target=lambda: seen.append(client.try_lock(name)))
    t.start()
    t.join()
    assert seen == [None]  # another thread of the same client is another owner
    inner.release()
    assert client.inspect(name).holder is not None
    outer.release()
    assert client.inspect(name).holder is None
    # An explicit owner is shared across threads.
    a = client.lock(name, owner="job-1")
    got: List[int] = []
    t = threading.Thread(target=lambda: got.append(client.lock(name, owner="job-1", timeout=0).fence))
    t.start()
    t.join()
    assert got == [a.fence]
    client.close()


def test_release_from_another_thread(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name)
    t = threading.Thread(target=lease.release)
    t.start()
    t.join()
    assert client.inspect(name).holder is None


def test_mutex_like_threading_lock(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    m, other = a.mutex(name, ttl=5.0), b.mutex(name)
    with m:
        assert m.locked() and other.locked()
        assert m.fence is not None
        assert other.acquire(blocking=False) is False
        assert other.acquire(timeout=0.1) is False
    assert not m.locked()
    assert other.acquire()
    other.release()
    with pytest.raises(RuntimeError):
        other.release()
    with pytest.raises(ValueError):
        other.acquire(blocking=False, timeout=1)


def test_mutex_serializes_threads(sqlite_url: str, name: str) -> None:
    client = fencelock.connect(sqlite_url)
    m = client.mutex(name)
    inside, overlaps, counter = [0], [0], [0]

    def work() -> None:
        for _ in range(5):
            with m:
                inside[0] += 1
                if inside[0] > 1:
                    overlaps[0] += 1
                time.sleep(0.002)
                counter[0] += 1
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter[0] == 20 and overlaps[0] == 0


def test_lost_signal_and_callback(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    lease = a.lock(name, ttl=0.6)
    fired = threading.Event()
    called_on: List[str] = []

    def on_lost() -> None:
        called_on.append(threading.current_thread().name)
        lease.valid  # a callback may use the API: it runs on its own thread
        fired.set()

    lease.on_lost(on_lost)
    assert not lease.lost.is_set() and not lease.lost.wait(0.05)
    assert b.force_release(name)
    assert lease.lost.wait(5.0)
    assert lease.lost.is_set() and not lease.valid
    assert fired.wait(5.0) and called_on[0].startswith("fencelock-lost-")
    reason = lease.lost.reason
    assert reason and not reason.startswith("lock "), reason  # core's own words, no prefix to strip
    with pytest.raises(fencelock.LockLost) as info:
        lease.renew()
    assert (info.value.lock, info.value.backend) == (name, a.url)
    assert reason in str(info.value) and not info.value.retryable
    with pytest.raises(fencelock.LockLost):
        lease.release()
    late: List[bool] = []
    lease.on_lost(lambda: late.append(True))  # registered after the loss: called at once
    deadline = time.monotonic() + 5
    while not late and time.monotonic() < deadline:
        time.sleep(0.01)
    assert late == [True]


def test_on_lost_not_called_after_release(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name, ttl=0.3)
    called: List[bool] = []
    lease.on_lost(lambda: called.append(True))
    lease.release()
    assert lease.lost.wait() is False  # released: the signal ends without a loss, even with no timeout
    assert lease.lost.reason is None
    time.sleep(0.5)
    assert called == [] and not lease.lost.is_set()


def test_error_fields_are_data(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    held = a.lock(name)
    with pytest.raises(fencelock.Timeout) as info:
        b.lock(name, timeout=0.05)
    e = info.value
    assert (e.lock, e.backend, e.retryable) == (name, b.url, True)
    assert str(e).startswith(f"lock {name!r}".replace("'", '"') + f" on {b.url}: ")
    held.release()
    with pytest.raises(fencelock.Unavailable) as unreachable:
        fencelock.connect("redis://127.0.0.1:1", connect_timeout=2.0)
    assert unreachable.value.lock is None and unreachable.value.retryable
    assert all(k.retryable == (k in (ErrorKind.TIMEOUT, ErrorKind.UNAVAILABLE)) for k in ErrorKind)


def test_mutex_timeouts_mean_the_same_as_in_asyncio(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    m = a.mutex(name)
    for unlimited in (-1, None):  # -1 as in threading, None as in fencelock.aio: both wait without limit
        assert m.acquire(timeout=unlimited)
        m.release()
        assert m.acquire(blocking=False, timeout=unlimited)
        m.release()
    held = b.lock(name)
    assert m.acquire(timeout=0.05) is False
    held.release()
    with pytest.raises(ValueError):
        m.acquire(timeout=-2)


def test_capability_and_default_url(client: fencelock.Client) -> None:
    caps = client.capability()
    assert caps.fencing and not caps.session_bound
    assert isinstance(fencelock.default_url(), str)
    assert client.url.startswith("sqlite:")
    assert repr(client).startswith("<fencelock.Client")


def test_memory_backend(name: str) -> None:
    url = f"memory://{name}"
    a, b = fencelock.connect(url), fencelock.connect(url)
    with a.lock(name):
        assert b.try_lock(name) is None
    assert b.try_lock(name) is not None


def test_bad_input_is_refused_like_everywhere_else(client: fencelock.Client, name: str) -> None:
    for call in (
        lambda: client.lock(name, owner=""),
        lambda: client.try_lock(name, owner=""),
        lambda: client.mutex(name, owner="").acquire(),
    ):
        with pytest.raises(fencelock.InvalidArgument) as info:
            call()
        assert "owner" in str(info.value)
    # A timeout too long for any clock waits without limit: a free name is granted, never a panic.
    with client.lock(name, timeout=1e19) as lease:
        assert lease.fence > 0
    with client.lock(name, timeout=1e30) as lease:  # beyond a Duration too: saturates
        assert lease.fence > 0
    with pytest.raises(fencelock.InvalidArgument):
        client.lock(name, timeout=float("inf"))
    with pytest.raises(fencelock.InvalidArgument):
        client.lock(name, ttl=1e19)
    assert client.inspect(name).holder is None and client.local_entries() == 0


def test_lost_wait_takes_timeouts_as_threading_event_does(client: fencelock.Client, name: str) -> None:
    event = threading.Event()
    lease = client.lock(name, ttl=5.0)
    assert lease.lost.wait(-1) is event.wait(-1) is False  # negative: no wait
    assert lease.lost.wait(0) is event.wait(0) is False
    assert client.force_release(name)
    assert lease.lost.wait(5.0)
    event.set()
    assert lease.lost.wait(-1) is event.wait(-1) is True  # already set: True at once
    with pytest.raises(fencelock.InvalidArgument):
        lease.lost.wait(float("nan"))


def test_fair_reaches_the_backend(sqlite_url: str, name: str) -> None:
    # The memory backend's waiters race: asking for arrival order is refused, by lock, try_lock and mutex alike.
    with fencelock.connect(f"memory://{name}") as client:
        with pytest.raises(fencelock.Unsupported, match="arrival order"):
            client.lock(name, fair=True)
        with pytest.raises(fencelock.Unsupported):
            client.try_lock(name, fair=True)
        with pytest.raises(fencelock.Unsupported):
            client.mutex(name, fair=True).acquire()
        with client.lock(name, fair=False):
            assert client.inspect(name).holder is not None
        assert client.inspect(name).holder is None
    # SQLite queues its waiters: both orders are served.
    with fencelock.connect(sqlite_url) as client:
        with client.lock(name, fair=True):
            pass
        with client.lock(name, fair=False):
            pass
