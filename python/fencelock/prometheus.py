"""A ``prometheus_client`` collector for fencelock clients: core's metric families, rebuilt in the registry.

::

    from prometheus_client import REGISTRY
    from fencelock.prometheus import FencelockCollector

    collector = FencelockCollector(client, labels={"app": "orders"})
    collector.add(other_client, labels={"app": "billing"})   # one collector for every client of a registry
    REGISTRY.register(collector)

The families come from core (``fencelock_acquire_wait_seconds``, ``fencelock_lost_total``, …); this module only
converts them. Constant ``labels`` tell the clients of one collector apart. Needs ``pip install prometheus_client``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

try:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as e:  # fencelock itself never needs it
    raise ImportError("fencelock.prometheus needs the prometheus_client package: pip install prometheus_client") from e

from ._common import ClientView
from .metrics import families

__all__ = ["FencelockCollector"]

AnyClient = ClientView  # fencelock.Client or fencelock.aio.Client
Family = Dict[str, Any]


class FencelockCollector(Collector):
    """Collects the metrics of one or more fencelock clients (sync or asyncio) at every scrape."""

    def __init__(self, client: Optional[AnyClient] = None, *, labels: Optional[Mapping[str, str]] = None) -> None:
        self._clients: List[Tuple[ClientView, Dict[str, str]]] = []
        if client is not None:
            self.add(client, labels=labels)
        elif labels:
            raise ValueError("labels are given per client: pass a client with them")

    def add(self, client: AnyClient, *, labels: Optional[Mapping[str, str]] = None) -> FencelockCollector:
        """Adds ``client``, its series carrying the constant ``labels``; returns the collector."""
        if not isinstance(client, ClientView):
            raise TypeError(f"FencelockCollector collects fencelock clients, not {type(client).__name__}")
        consts = dict(labels or {})
        for k, v in consts.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"labels must map str to str, found {k!r}: {v!r}")
        seen = [c for _, c in self._clients]
        if consts in seen:
            raise ValueError(f"another client of this collector has the labels {consts}: its series would collide")
        self._clients.append((client, consts))
        return self

    def describe(self) -> List[Metric]:
        # The names only, so that a registry refuses a second collector that would repeat these families.
        return [_family(f["name"], f["help"], f["type"], []) for f in families(_any_families_json(self._clients))]

    def collect(self) -> Iterator[Metric]:
        merged: Dict[str, Tuple[Family, List[Tuple[Dict[str, Any], Dict[str, str]]]]] = {}
        for client, consts in self._clients:
            for fam in families(client._native.metrics_families_json()):
                _, samples = merged.setdefault(fam["name"], (fam, []))
                samples.extend((s, consts) for s in fam["samples"])
        for fam, samples in merged.values():
            yield _build(fam, samples)


def _any_families_json(clients: List[Tuple[ClientView, Dict[str, str]]]) -> str:
    return clients[0][0]._native.metrics_families_json() if clients else "[]"


def _family(name: str, help: str, kind: str, label_names: List[str]) -> Metric:
    if kind == "counter":
        return CounterMetricFamily(name, help, labels=label_names)
    if kind == "gauge":
        return GaugeMetricFamily(name, help, labels=label_names)
    if kind == "histogram":
        return HistogramMetricFamily(name, help, labels=label_names)
    raise ValueError(f"metric family {name}: unknown type {kind!r}")


def _build(fam: Family, samples: List[Tuple[Dict[str, Any], Dict[str, str]]]) -> Metric:
    """One prometheus_client family from core's family and the samples of every client (with its constant labels)."""
    label_names: List[str] = []
    for sample, consts in samples:
        clash = consts.keys() & sample["labels"].keys()
        if clash:
            raise ValueError(f"constant labels {sorted(clash)} clash with {fam['name']}'s own labels")
        label_names = sorted({*sample["labels"], *consts})
        break
    metric: Any = _family(fam["name"], fam["help"], fam["type"], label_names)
    for sample, consts in samples:
        labels = {**sample["labels"], **consts}
        values = [labels[k] for k in label_names]
        hist = sample.get("histogram")
        if hist is None:
            metric.add_metric(values, sample["value"])
        else:
            buckets = [("+Inf" if b["le"] is None else repr(float(b["le"])), b["count"]) for b in hist["buckets"]]
            metric.add_metric(values, buckets, hist["sum"])
    result: Metric = metric
    return result
