"""The package's PEP 517 backend: maturin's, set to build a wheel PyPI accepts.

Through pip, maturin tags a wheel ``linux_x86_64`` unless the build arguments name a compatibility, and pyproject.toml
cannot ask for zig. So ``pip wheel ./python`` and ``pip install ./python`` come here, and the wheel is built with zig
as the linker against glibc 2.17 and tagged ``manylinux_2_17`` (manylinux2014): it installs on any x86_64 Linux with
CPython >= 3.9, without Rust. Build arguments given with ``-C build-args=…`` or ``MATURIN_PEP517_ARGS`` are kept; one
that names a compatibility of its own turns this off.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Mapping

import maturin
from maturin import (  # noqa: F401 (the hooks this backend leaves as maturin has them)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PORTABLE = ["--zig", "--compatibility", "manylinux2014"]


def _portable(config_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    settings = dict(config_settings or {})
    given = settings.pop("maturin.build-args", settings.pop("build-args", None))
    if given is None:
        args = shlex.split(os.environ.get("MATURIN_PEP517_ARGS", ""))
    elif isinstance(given, str):
        args = shlex.split(given)
    else:
        args = list(given)
    if "--compatibility" not in args and "--manylinux" not in args:
        args = PORTABLE + args
    settings["maturin.build-args"] = args
    return settings


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return maturin.build_wheel(wheel_directory, _portable(config_settings), metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    # A development install runs where it was built: no need for zig.
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
