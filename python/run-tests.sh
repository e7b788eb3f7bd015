#!/usr/bin/env bash
# The Python stage of scripts/test.sh: build the wheel the way the README does (`pip wheel ./python`: maturin and zig
# from PyPI, a cp39-abi3 manylinux2014 wheel; the dev profile here, in the workspace target dir, so the core compiles
# once per run), check its tag, install it into a fresh venv, and run pytest against the installed wheel (never the
# source tree) with no cargo and no protoc on PATH, mypy --strict on the package, its stubs and the typed examples,
# then the examples.
#
#   python/run-tests.sh [PYTEST ARGS...]
#
# Uses the servers of scripts/services.sh when FENCELOCK_TEST_* are set (source DIR/env first); with
# FENCELOCK_REQUIRE_SERVICES=1 a missing one fails. PYTHON picks the interpreter (default python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$ROOT/target/python
VENV=$WORK/venv
WHEELS=$WORK/wheels

step() { printf -- '--- %s\n' "$*"; }

# Debian's python3 makes venvs only with python3-venv; install it like the test servers, if we may.
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    if ((EUID == 0)) && command -v apt-get >/dev/null; then
        apt-get install -y -q python3-venv >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q python3-venv >/dev/null; }
    else
        echo "$PYTHON cannot make a venv: install python3-venv" >&2
        exit 1
    fi
fi

step "wheel (pip wheel ./python: maturin + zig, dev profile, workspace target dir)"
rm -rf "$VENV" "$WHEELS"
mkdir -p "$WORK"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$WHEELS" \
    --config-settings=build-args="--profile dev --strip" "$ROOT/python"
wheel=$(find "$WHEELS" -name 'fencelock-*.whl')
echo "${wheel##*/}"
# What PyPI accepts for Linux: a manylinux tag, never plain linux_x86_64.
[[ ${wheel##*/} == fencelock-*-cp39-abi3-*manylinux_2_17_x86_64*.whl ]] || {
    echo "the wheel is not tagged cp39-abi3 manylinux2014 x86_64" >&2
    exit 1
}

step "fresh venv in $VENV (the wheel, pytest, mypy, prometheus_client for fencelock.prometheus)"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check pytest mypy "prometheus_client==0.26.0"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"

# The installed package needs no Rust: run everything with a PATH that has no cargo, rustc or protoc.
PATH=$VENV/bin:/usr/local/bin:/usr/bin:/bin
for tool in cargo rustc protoc; do
    if command -v "$tool" >/dev/null; then
        echo "$tool is still on PATH ($(command -v "$tool")): the wheel would not be tested without it" >&2
        exit 1
    fi
done

# From a directory outside the source tree, so `import fencelock` finds the installed wheel.
RUN=$(mktemp -d)
trap 'rm -rf "$RUN"' EXIT
cd "$RUN"

step "pytest (installed wheel)"
rc=0
"$VENV/bin/python" -m pytest -p no:cacheprovider -rs "$ROOT/python/tests" "$@" || rc=$?
if ((rc == 5)); then
    echo "pytest collected no tests: failing" >&2
fi
((rc == 0)) || exit "$rc"

step "mypy --strict (package, stubs, examples)"
"$VENV/bin/mypy" --strict --no-incremental "$ROOT/python/fencelock" "$ROOT/examples/python"

step "examples"
for example in "$ROOT"/examples/python/*.py; do
    printf '%s\n' "${example#"$ROOT/"}"
    "$VENV/bin/python" "$example" "sqlite:$RUN/example.db" >/dev/null
    if [[ -n ${FENCELOCK_TEST_REDIS:-} ]]; then "$VENV/bin/python" "$example" "$FENCELOCK_TEST_REDIS" >/dev/null; fi
done
echo "python: all passed"
