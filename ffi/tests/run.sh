#!/usr/bin/env bash
# The C tests: builds the debug cdylib, compiles ffi/tests/c/*.c and examples/c/demo.c with AddressSanitizer (which
# includes LeakSanitizer on Linux), runs the conformance basics, the misuse, the metrics and the read-write lock and
# semaphore tests on a temporary SQLite file, on Redis (FENCELOCK_TEST_REDIS), Redis behind Sentinel
# (FENCELOCK_TEST_SENTINEL) and on MariaDB (FENCELOCK_TEST_MYSQL), the last also on memory://, etcd and PostgreSQL,
# the demo, and the demo again as
# examples/c/CMakeLists.txt builds it (cmake + pkg-config, installed with apt if missing), and prints `N passed, N failed`.
# Usage: ffi/tests/run.sh [--no-build]
# The ASan build runs the Rust code uninstrumented: ASan's malloc serves Rust's allocations too (Rust uses the
# system allocator), so leaks and bad frees of anything the C side receives are caught.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/debug
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
# The same build as the test command's build stage, so this is a no-op there and nothing recompiles with another
# feature set (TOOLCHAIN.md gotcha 11). --no-build: use the library already in the target directory.
if [[ ${1:-} != --no-build ]]; then
    cargo build --workspace --all-targets --quiet
fi

CC=${CC:-gcc}
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -fsanitize=address -fno-omit-frame-pointer
    -I"$ROOT/ffi/include")
LDFLAGS=(-L"$TARGET" -lfencelock_ffi "-Wl,-rpath,$TARGET" -pthread)
# detect_leaks: on by default on x86_64 Linux, explicit for other hosts. abort_on_error=0 keeps exit codes.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}

for src in ffi/tests/c/*.c examples/c/demo.c; do
    "$CC" "${CFLAGS[@]}" "$src" -o "$WORK/$(basename "$src" .c)" "${LDFLAGS[@]}"
done

PASSED=0
FAILED=0
# run NAME CMD...: a test binary prints "SUITE: N passed, M failed"; a crash or a sanitizer report is a failure.
run() {
    local name=$1 out rc=0
    shift
    printf -- '--- %s\n' "$name"
    out=$(timeout 300 "$@" 2>&1) || rc=$? # a hang is a failure, not a stuck run
    printf '%s\n' "$out"
    local line p=0 f=0
    line=$(grep -E ': [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n1 || true)
    if [[ -n $line ]]; then
        p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
        f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
    fi
    if [[ -z $line ]] && ((rc == 0)); then p=1; fi # a program without checks (the demo) passes by exiting 0
    if ((rc != 0 && f == 0)); then f=1; fi          # crashed, leaked or hung without counting it
    if grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\)' <<<"$out"; then ((f == 0)) && f=1; fi
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    if ((f)); then printf -- '--- %s: FAILED (exit %d)\n' "$name" "$rc"; fi
}

run "conformance sqlite" "$WORK/conformance" "sqlite:$WORK/conformance.db"
run "misuse sqlite" env FENCELOCK_RUNTIME_THREADS=3 "$WORK/misuse" "sqlite:$WORK/misuse.db"
run "metrics sqlite" "$WORK/metrics" "sqlite:$WORK/metrics.db"
run "primitives memory" "$WORK/primitives" "memory://c-primitives" require
run "primitives sqlite" "$WORK/primitives" "sqlite:$WORK/primitives.db"
# served LABEL VAR: the conformance basics and misuse tests on the server VAR names, if the test command started it.
served() {
    local label=$1 url=${!2:-}
    if [[ -n $url ]]; then
        run "conformance $label" "$WORK/conformance" "$url"
        run "misuse $label" "$WORK/misuse" "$url"
        run "metrics $label" "$WORK/metrics" "$url"
        run "primitives $label" "$WORK/primitives" "$url"
    elif [[ ${FENCELOCK_REQUIRE_SERVICES:-} == 1 ]]; then
        echo "--- conformance $label: $2 is not set but FENCELOCK_REQUIRE_SERVICES=1"
        FAILED=$((FAILED + 1))
    else
        echo "--- conformance $label: skipped ($2 is not set)"
    fi
}
served redis FENCELOCK_TEST_REDIS
served redis-tls FENCELOCK_TEST_REDIS_SECURE
served redis-sentinel FENCELOCK_TEST_SENTINEL
served mysql FENCELOCK_TEST_MYSQL
# The read-write lock and semaphore tests also where those kinds are implemented beyond SQLite.
for var in FENCELOCK_TEST_ETCD FENCELOCK_TEST_POSTGRES; do
    if [[ -n ${!var:-} ]]; then run "primitives ${var#FENCELOCK_TEST_}" "$WORK/primitives" "${!var}"; fi
done
run "demo" "$WORK/demo" "sqlite:$WORK/demo.db"

# The README's CMake example, as a user builds it: against an installed fencelock found through fencelock.pc.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v pkg-config >/dev/null || missing+=(pkgconf)
if ((${#missing[@]})); then
    if ((EUID == 0)) && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
            { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
    else
        echo "the CMake example needs ${missing[*]}: install them" >&2
        exit 1
    fi
fi
PREFIX=$WORK/prefix
mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig"
cp ffi/include/fencelock.h "$PREFIX/include/"
cp "$TARGET/libfencelock_ffi.so" "$PREFIX/lib/"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@VERSION@|0.1.0|" ffi/fencelock.pc.in >"$PREFIX/lib/pkgconfig/fencelock.pc"
if PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig cmake -S examples/c -B "$WORK/cmake" >"$WORK/cmake.log" 2>&1 &&
    cmake --build "$WORK/cmake" >>"$WORK/cmake.log" 2>&1; then
    run "cmake example" env LD_LIBRARY_PATH="$PREFIX/lib" "$WORK/cmake/demo" "sqlite:$WORK/cmake-demo.db"
else
    cat "$WORK/cmake.log"
    echo "--- cmake example: FAILED to build"
    FAILED=$((FAILED + 1))
fi

echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
