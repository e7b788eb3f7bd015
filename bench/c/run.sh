#!/usr/bin/env bash
# The C path next to the Rust path, in one run: uncontended lock + release cycles through the C API (bench/c/bench.c)
# and fencelock-bench's figure 1 (the same cycle in Rust), on the memory backend and on Redis (FENCELOCK_TEST_REDIS).
# Prints the per-call overhead of the C path on memory (target ≤ 2 µs per call) and the Redis throughput ratio C/Rust
# (target ≥ 0.9) with PASS/MISS. On demand, not a test: a miss is printed, the exit status is non-zero only when a
# program fails.
# Usage: bench/c/run.sh [--seconds N]    (N: length of each timed phase, default 3)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
SECS=3
while (($#)); do
    case $1 in
    --seconds)
        SECS=${2:?--seconds needs a value}
        shift 2
        ;;
    -h | --help)
        sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "run.sh: unknown argument $1 (usage: bench/c/run.sh [--seconds N])" >&2
        exit 2
        ;;
    esac
done

CALLS_PER_CYCLE=3 # fencelock_lock, fencelock_lease_release, fencelock_lease_free
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"

# Release builds only, and only when missing: debug builds measure the compiler, not the library.
[[ -f $TARGET/libfencelock_ffi.so ]] || cargo build -p fencelock-ffi --release
[[ -x $TARGET/fencelock-bench ]] || cargo build -p fencelock-bench --release

CC=${CC:-cc}
"$CC" -O2 -std=c11 -Wall -Wextra -Werror -I"$ROOT/ffi/include" bench/c/bench.c -o "$WORK/bench" \
    -L"$TARGET" -lfencelock_ffi "-Wl,-rpath,$TARGET" -pthread

# field LINE KEY: the value of KEY=… in bench.c's output line.
field() { sed -E "s/.* $2=([^ ]+).*/\1/" <<<"$1"; }

# rust_figure1 BACKEND: fencelock-bench's figure-1 table for BACKEND (the whole run's output goes to $WORK/BACKEND.out).
rust_figure1() {
    local out=$WORK/$1.out rc=0
    "$TARGET/fencelock-bench" --backend "$1" --seconds "$SECS" >"$out" 2>&1 || rc=$?
    if ((rc != 0)); then
        cat "$out" >&2
        echo "run.sh: fencelock-bench --backend $1 exited $rc" >&2
        exit 1
    fi
    # From the figure-1 title to the next blank line or figure.
    awk '/^1\. uncontended/ {on = 1; print; next} on && (/^$/ || /^[0-9]/) {exit} on' "$out"
}

# compare BACKEND URL NAME: both sides on one backend; sets C_RATE, C_NS, RUST_RATE, RUST_NS.
compare() {
    local backend=$1 url=$2 name=$3 line table
    echo "== $backend ($url)"
    line=$("$WORK/bench" "$url" "$name" "$SECS")
    table=$(rust_figure1 "$backend")
    C_RATE=$(field "$line" cycles_per_s)
    C_NS=$(field "$line" ns_per_cycle)
    # The fencelock column of the figure's `cycles/s` row, e.g. "  cycles/s   123456/s   234567/s   0.53  …".
    RUST_RATE=$(awk '$1 == "cycles/s" {sub(/\/s$/, "", $2); print $2; exit}' <<<"$table")
    if [[ -z $RUST_RATE ]]; then
        echo "run.sh: no figure-1 cycles/s row in fencelock-bench's output:" >&2
        cat "$WORK/$backend.out" >&2
        exit 1
    fi
    RUST_NS=$(awk -v r="$RUST_RATE" 'BEGIN {printf "%.0f", 1e9 / r}')
    echo "fencelock-bench --backend $backend --seconds $SECS, figure 1 (Rust: client.lock(name).release()):"
    awk '{print "  " $0}' <<<"$table"
    echo "bench.c (C: fencelock_lock + fencelock_lease_release + fencelock_lease_free):"
    echo "  $line"
    printf '  %-12s %14s %14s\n' "" "cycles/s" "ns/cycle"
    printf '  %-12s %14s %14s\n' "C" "$C_RATE" "$C_NS" "Rust" "$RUST_RATE" "$RUST_NS"
}

compare memory "memory://bench-c" "bench-c-uncontended"
awk -v c="$C_NS" -v r="$RUST_NS" -v k="$CALLS_PER_CYCLE" 'BEGIN {
    o = (c - r) / k
    printf "  per-call overhead of C over Rust: (%.0f - %.0f) ns / %d calls = %.0f ns   target ≤ 2000 ns  %s\n",
        c, r, k, o, (o <= 2000 ? "PASS" : "MISS")
}'
echo

if [[ -n ${FENCELOCK_TEST_REDIS:-} ]]; then
    compare redis "$FENCELOCK_TEST_REDIS" "bench-c-uncontended"
    awk -v c="$C_RATE" -v r="$RUST_RATE" -v cn="$C_NS" -v rn="$RUST_NS" -v k="$CALLS_PER_CYCLE" 'BEGIN {
        q = c / r
        printf "  throughput ratio C/Rust: %.0f / %.0f = %.2f   target ≥ 0.9  %s\n", c, r, q, (q >= 0.9 ? "PASS" : "MISS")
        printf "  (per-call overhead on Redis, for reference: %.0f ns)\n", (cn - rn) / k
    }'
else
    echo "== redis: skipped (FENCELOCK_TEST_REDIS is not set; scripts/services.sh start DIR && source DIR/env)"
fi
