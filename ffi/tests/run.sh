#!/usr/bin/env bash
# The C tests: builds the debug cdylib, compiles ffi/tests/c/*.c and examples/c/demo.c with AddressSanitizer (which
# includes LeakSanitizer on Linux), runs the JSON scenarios of tests/conformance (conformance.c, which reads them
# with jansson: libjansson-dev, installed with apt if missing) on memory://, SQLite and every server of the runners'
# BACKENDS table that the test command started, then the C API checks, the misuse, the metrics and the read-write
# lock and semaphore and the election API tests on a temporary SQLite file, on Redis (FENCELOCK_TEST_REDIS), Redis behind Sentinel
# (FENCELOCK_TEST_SENTINEL) and on MariaDB (FENCELOCK_TEST_MYSQL), the last also on memory://, etcd and PostgreSQL,
# the election API test also on etcd and ZooKeeper, the demo, and the demo again as
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

# install_missing PKG...: Debian packages the C tests need, with apt-get as root (after an `apt-get update` if the
# package lists are stale); elsewhere the caller is told what to install.
install_missing() {
    if ((EUID == 0)) && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null ||
            { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null; }
    else
        echo "the C tests need $*: install them" >&2
        exit 1
    fi
}
# The scenario runner parses the JSON with jansson.
[[ -f /usr/include/jansson.h ]] || install_missing libjansson-dev

CC=${CC:-gcc}
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -fsanitize=address -fno-omit-frame-pointer
    -I"$ROOT/ffi/include")
LDFLAGS=(-L"$TARGET" -lfencelock_ffi "-Wl,-rpath,$TARGET" -pthread -ljansson)
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

# The JSON scenarios on the runners' BACKENDS table (core/tests/conformance.rs): label, the variable naming the
# server's URL, an address of that backend where nothing answers. A served backend runs if the test command started it.
SCENARIOS=$ROOT/tests/conformance
run "conformance memory" "$WORK/conformance" "$SCENARIOS" memory "memory://c-conformance-$$"
run "conformance sqlite" "$WORK/conformance" "$SCENARIOS" sqlite "sqlite:$WORK/conformance.db" \
    "sqlite:/nonexistent-dir/fencelock/locks.db"
while read -r label var unreachable; do
    if [[ -n ${!var:-} ]]; then
        run "conformance $label" "$WORK/conformance" "$SCENARIOS" "$label" "${!var}" "$unreachable"
    else
        echo "--- conformance $label: skipped ($var is not set)"
    fi
done <<'BACKENDS'
redis FENCELOCK_TEST_REDIS redis://127.0.0.1:1
redis-tls FENCELOCK_TEST_REDIS_SECURE rediss://127.0.0.1:1
redlock FENCELOCK_TEST_REDLOCK redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3
redis-cluster FENCELOCK_TEST_REDIS_CLUSTER redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3
redis-sentinel FENCELOCK_TEST_SENTINEL redis+sentinel://127.0.0.1:1/fencelock-master
etcd FENCELOCK_TEST_ETCD etcd://127.0.0.1:1
postgres FENCELOCK_TEST_POSTGRES postgres://postgres@127.0.0.1:1/fencelock_test
mysql FENCELOCK_TEST_MYSQL mysql://root@127.0.0.1:1/fencelock_test
zk FENCELOCK_TEST_ZK zk://127.0.0.1:1
BACKENDS
run "api sqlite" "$WORK/api" "sqlite:$WORK/api.db"
run "misuse sqlite" env FENCELOCK_RUNTIME_THREADS=3 "$WORK/misuse" "sqlite:$WORK/misuse.db"
run "metrics sqlite" "$WORK/metrics" "sqlite:$WORK/metrics.db"
run "primitives memory" "$WORK/primitives" "memory://c-primitives" require
run "primitives sqlite" "$WORK/primitives" "sqlite:$WORK/primitives.db"
run "election memory" "$WORK/election" "memory://c-election"
run "election sqlite" "$WORK/election" "sqlite:$WORK/election.db"
# served LABEL VAR: the C API, misuse, metrics and primitives tests on the server VAR names, if the test command
# started it.
served() {
    local label=$1 url=${!2:-}
    if [[ -n $url ]]; then
        run "api $label" "$WORK/api" "$url"
        run "misuse $label" "$WORK/misuse" "$url"
        run "metrics $label" "$WORK/metrics" "$url"
        run "primitives $label" "$WORK/primitives" "$url"
        run "election $label" "$WORK/election" "$url"
    elif [[ ${FENCELOCK_REQUIRE_SERVICES:-} == 1 ]]; then
        echo "--- api $label: $2 is not set but FENCELOCK_REQUIRE_SERVICES=1"
        FAILED=$((FAILED + 1))
    else
        echo "--- api $label: skipped ($2 is not set)"
    fi
}
served redis FENCELOCK_TEST_REDIS
served redis-tls FENCELOCK_TEST_REDIS_SECURE
served redis-sentinel FENCELOCK_TEST_SENTINEL
served mysql FENCELOCK_TEST_MYSQL
# The read-write lock and semaphore API tests also where those kinds are implemented beyond SQLite.
for var in FENCELOCK_TEST_ETCD FENCELOCK_TEST_POSTGRES; do
    if [[ -n ${!var:-} ]]; then run "primitives ${var#FENCELOCK_TEST_}" "$WORK/primitives" "${!var}"; fi
done
# The election API test also on the session-bound and PostgreSQL backends, whose records keep values or not.
for var in FENCELOCK_TEST_ETCD FENCELOCK_TEST_ZK FENCELOCK_TEST_POSTGRES; do
    if [[ -n ${!var:-} ]]; then run "election ${var#FENCELOCK_TEST_}" "$WORK/election" "${!var}"; fi
done
run "demo" "$WORK/demo" "sqlite:$WORK/demo.db"

# The README's CMake example, as a user builds it: against an installed fencelock found through fencelock.pc.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v pkg-config >/dev/null || missing+=(pkgconf)
if ((${#missing[@]})); then install_missing "${missing[@]}"; fi
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
