"""Shared fixtures: backend URLs, the installed-wheel guard, and the conformance matrix in the summary."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # conformance_runner

import fencelock  # noqa: E402

SOURCE_TREE = Path(__file__).resolve().parents[1] / "fencelock"

# backend label → [(scenario, result)], filled by test_conformance.py.
MATRIX: Dict[str, List[Tuple[str, str]]] = {}


def pytest_configure(config: pytest.Config) -> None:
    # The tests are of the installed wheel, not of the source tree (which has no native module).
    here = Path(fencelock.__file__).resolve().parent
    if here == SOURCE_TREE and os.environ.get("FENCELOCK_ALLOW_SOURCE_TREE") != "1":
        raise pytest.UsageError(f"fencelock was imported from the source tree {here}; install the wheel and run from elsewhere")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not MATRIX:
        return
    terminalreporter.section("conformance matrix")
    for backend, row in MATRIX.items():
        cells = " ".join(f"{name}={result}" for name, result in sorted(row))
        terminalreporter.write_line(f"conformance matrix row: python × {backend}: {cells}")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite database."""
    return f"sqlite:{tmp_path / 'locks.db'}"


@pytest.fixture
def client(sqlite_url: str) -> Iterator[fencelock.Client]:
    """A client of a fresh SQLite database."""
    c = fencelock.connect(sqlite_url)
    yield c
    c.close()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"test-{uuid.uuid4().hex}"
