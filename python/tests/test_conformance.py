"""The shared conformance scenarios on sqlite, memory and every served backend (FENCELOCK_TEST_*)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conformance_runner import SERVED, Scenario, StepFailed, capability_flags, run_scenario, scenarios, served_url
from conftest import MATRIX

SCENARIOS = scenarios()


def _backends() -> List[Tuple[str, Optional[str], Optional[str]]]:
    """(label, url or None for a per-run one, unreachable address); a served one with its variable unset is None."""
    rows: List[Tuple[str, Optional[str], Optional[str]]] = [("memory", None, None), ("sqlite", None, None)]
    for label, var, unreachable in SERVED:
        rows.append((label, served_url(var) or "", unreachable))
    return rows


_FLAGS: Dict[str, List[str]] = {}


def _url(label: str, url: Optional[str], tmp: Path) -> str:
    if label == "memory":
        return f"memory://conformance-{uuid.uuid4().hex}"
    if label == "sqlite":
        return f"sqlite:{tmp / 'locks.db'}"
    assert url is not None
    return url


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 9, SCENARIOS


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
@pytest.mark.parametrize("backend", _backends(), ids=[b[0] for b in _backends()])
def test_scenario(backend: Tuple[str, Optional[str], Optional[str]], sc: Scenario, tmp_path: Path) -> None:
    label, url, unreachable = backend
    if url == "":
        pytest.skip(f"{label}: its FENCELOCK_TEST_* variable is not set (run through scripts/test.sh)")
    if label == "sqlite":
        unreachable = "sqlite:/nonexistent-dir/fencelock/locks.db"
    real = _url(label, url, tmp_path)
    flags = _FLAGS.get(label) if label not in ("memory", "sqlite") else None
    if flags is None:
        flags = capability_flags(real)
        if label not in ("memory", "sqlite"):
            _FLAGS[label] = flags
    row = MATRIX.setdefault(label, [])
    try:
        result = run_scenario(sc, real, unreachable, flags)
    except StepFailed as e:
        row.append((sc.name, "FAIL"))
        pytest.fail(f"{label}/{sc.name}: {e}", pytrace=False)
    except BaseException:
        row.append((sc.name, "FAIL"))
        raise
    row.append((sc.name, result))
    if result == "skip":
        pytest.skip(f"{sc.name} does not apply to {label} (unless: {sc.unless}, requires: {sc.requires})")
