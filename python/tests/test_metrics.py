"""client.metrics() moves as a scripted workload says, on real Redis and SQLite, sync and asyncio; the options are
validated; and fencelock.prometheus exports core's families through a real registry and parser."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Callable, Dict, List

import pytest

import fencelock
import fencelock.aio
from fencelock.metrics import MetricsSnapshot


def backends(sqlite: str) -> List[str]:
    urls = [sqlite]
    redis = os.environ.get("FENCELOCK_TEST_REDIS")
    if redis:
        urls.append(redis)
    elif os.environ.get("FENCELOCK_REQUIRE_SERVICES") == "1":
        raise RuntimeError("FENCELOCK_TEST_REDIS is not set but FENCELOCK_REQUIRE_SERVICES=1")
    return urls


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    urls = dict(zip(["sqlite", "redis"], backends(sqlite_url)))
    if request.param not in urls:
        pytest.skip("FENCELOCK_TEST_REDIS is not set")
    return urls[request.param]


def eventually(read: Callable[[], MetricsSnapshot], cond: Callable[[MetricsSnapshot], bool]) -> MetricsSnapshot:
    deadline = time.monotonic() + 10
    while True:
        m = read()
        if cond(m):
            return m
        assert time.monotonic() < deadline, m
        time.sleep(0.01)


def test_sync_workload_moves_the_metrics(url: str) -> None:
    name = f"m-{uuid.uuid4().hex}"
    a = fencelock.connect(url, metrics_names=["m-hot"])
    b = fencelock.connect(url)
    assert a.metrics()["backend"] == url.split(":")[0] and a.metrics()["enabled"]
    lease = a.lock(name, ttl=5.0)
    with pytest.raises(fencelock.Timeout):
        b.lock(name, ttl=5.0, timeout=0.15)
    m = b.metrics()
    assert m["acquire_wait"]["timeout"]["count"] == 1 and m["acquire_wait"]["timeout"]["sum"] >= 0.15
    lease.release()
    # taken: force_release, then the renewal finds the record gone.
    lease = a.lock(name, ttl=5.0, watchdog=False)
    assert b.force_release(name)
    with pytest.raises(fencelock.LockLost):
        lease.renew()
    assert a.metrics()["lost"]["taken"] == 1 and a.metrics()["renewals"]["failed"] == 1
    with pytest.raises(fencelock.LockLost):  # ends the lost hold, so the next lock() is a new grant
        lease.release()
    # expired: watchdog off, the TTL passes.
    lease = a.lock(name, ttl=0.2, watchdog=False)
    assert lease.lost.wait(10.0)
    eventually(a.metrics, lambda m: m["lost"]["expired"] == 1)
    # a stale fenced write is refused and counted.
    fence = a.fence(f"res-{uuid.uuid4().hex}")
    fence.write(lease.fence + 1, b"new")
    with pytest.raises(fencelock.Fenced):
        fence.write(lease.fence, b"stale")
    m = a.metrics()
    assert (m["fence_writes"]["ok"], m["fence_writes"]["refused"]) == (1, 1)
    # only the opted-in name has series of its own.
    with a.lock("m-hot"):
        pass
    m = a.metrics()
    assert list(m["names"]) == ["m-hot"] and m["names"]["m-hot"]["acquire_wait"]["acquired"]["count"] == 1
    assert m["active_leases"] == 0 and m["backend_ops"]["fence_write"]["ok"]["count"] == 2
    a.close()
    b.close()


def test_asyncio_workload_moves_the_metrics(url: str) -> None:
    async def main() -> None:
        name = f"m-{uuid.uuid4().hex}"
        a = await fencelock.aio.connect(url, metrics_names=True)
        b = await fencelock.aio.connect(url)
        lease = await a.lock(name, ttl=5.0)
        with pytest.raises(fencelock.Timeout):
            await b.lock(name, ttl=5.0, timeout=0.15)
        assert b.metrics()["acquire_wait"]["timeout"]["count"] == 1
        await lease.release()
        lease = await a.lock(name, ttl=5.0, watchdog=False)
        assert await b.force_release(name)
        with pytest.raises(fencelock.LockLost):
            await lease.renew()
        assert a.metrics()["lost"]["taken"] == 1
        with pytest.raises(fencelock.LockLost):
            await lease.release()
        lease = await a.lock(name, ttl=0.2, watchdog=False)
        assert await lease.lost.wait(10.0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while a.metrics()["lost"]["expired"] != 1:
            assert loop.time() < deadline, a.metrics()
            await asyncio.sleep(0.01)
        fence = a.fence(f"res-{uuid.uuid4().hex}")
        await fence.write(lease.fence + 1, b"new")
        with pytest.raises(fencelock.Fenced):
            await fence.write(lease.fence, b"stale")
        m = a.metrics()
        assert m["fence_writes"]["refused"] == 1 and name in m["names"]
        await a.close()
        await b.close()

    asyncio.run(main())


def test_metrics_off_records_nothing(sqlite_url: str) -> None:
    with fencelock.connect(sqlite_url, metrics=False, metrics_names=True) as c:
        with c.lock("off"):
            pass
        m = c.metrics()
        assert not m["enabled"] and m["acquire_wait"]["acquired"]["count"] == 0 and m["names"] == {}
        assert all(h["count"] == 0 for o in m["backend_ops"].values() for h in (o["ok"], o["error"]))


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"metrics": 1}, TypeError),
        ({"metrics_names": "x"}, TypeError),
        ({"metrics_names": 3}, TypeError),
        ({"metrics_names": [1]}, TypeError),
        ({"metrics_names": [""]}, fencelock.InvalidArgument),
    ],
)
def test_bad_metrics_options_are_refused(sqlite_url: str, kwargs: Dict[str, object], error: type) -> None:
    with pytest.raises(error, match="metrics"):
        fencelock.connect(sqlite_url, **kwargs)  # type: ignore[arg-type]


def test_prometheus_collector_exports_cores_families(url: str) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from fencelock.prometheus import FencelockCollector

    name = f"m-{uuid.uuid4().hex}"
    a = fencelock.connect(url, metrics_names=[name])
    b = fencelock.connect(url)
    with a.lock(name):
        with pytest.raises(fencelock.Timeout):
            b.lock(name, timeout=0.05)
    registry = CollectorRegistry()
    collector = FencelockCollector(a, labels={"client": "a"}).add(b, labels={"client": "b"})
    registry.register(collector)
    with pytest.raises(ValueError):  # a second collector would repeat the families
        registry.register(FencelockCollector(b))
    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    scheme = url.split(":")[0]
    key = lambda n, **l: (n, tuple(sorted({"backend": scheme, **l}.items())))  # noqa: E731
    assert samples[key("fencelock_acquire_wait_seconds_count", client="b", outcome="timeout")] == 1
    assert samples[key("fencelock_acquire_wait_seconds_count", client="a", outcome="acquired")] == 1
    assert samples[key("fencelock_acquire_wait_seconds_bucket", client="b", outcome="timeout", le="+Inf")] == 1
    assert samples[key("fencelock_hold_seconds_count", client="a")] == 1
    assert samples[key("fencelock_lost_total", client="a", reason="taken")] == 0
    assert samples[key("fencelock_active_leases", client="a")] == 0
    assert samples[key("fencelock_lock_hold_seconds_count", client="a", lock=name)] == 1
    with pytest.raises(ValueError, match="collide"):
        collector.add(fencelock.connect(url), labels={"client": "a"})
    a.close()
    b.close()


def test_prometheus_client_is_needed_only_by_the_adapter() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"  # as if not installed
        "import fencelock, fencelock.aio\n"
        "try:\n    import fencelock.prometheus\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "prometheus_client" in out
