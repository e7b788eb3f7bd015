#!/usr/bin/env bash
# fencelock from Java next to Rust and to the JVM's usual locks, in one run (on demand, not a test):
#   - uncontended acquire+release on Redis: fencelock-bench's figure 1 (Rust), fencelock from Java, Redisson's RLock;
#     ratio Java/Rust with its target (≥ 0.8); Redisson's RFairLock beside it;
#   - contended hand-off (8 threads) on Redis: fencelock Java vs Redisson's RLock and RFairLock;
#   - ZooKeeper: uncontended and hand-off, fencelock Java vs Curator's InterProcessMutex;
#   - read holds (8 threads) and a 4-permit semaphore vs Redisson's and Curator's, and vs fencelock's own mutex.
# Release builds of the native library and of fencelock-bench (built here if missing); the Java harness loads the
# release library through java.library.path. Servers: FENCELOCK_TEST_REDIS and FENCELOCK_TEST_ZK.
# Usage: bench/java/run.sh [--seconds N]    (N: length of each timed phase, default 3)
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
    *)
        sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        [[ $1 == -h || $1 == --help ]] && exit 0
        exit 2
        ;;
    esac
done
: "${FENCELOCK_TEST_REDIS:?set FENCELOCK_TEST_REDIS (scripts/services.sh start DIR && source DIR/env)}"
: "${FENCELOCK_TEST_ZK:?set FENCELOCK_TEST_ZK (scripts/services.sh start DIR && source DIR/env)}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"

[[ -f $TARGET/libfencelock_jni.so ]] || cargo build -p fencelock-jvm --release
[[ -x $TARGET/fencelock-bench ]] || cargo build -p fencelock-bench --release
MVN=(mvn -B -ntp -q -Dstyle.color=never)
"${MVN[@]}" -f jvm install -DskipTests
"${MVN[@]}" -f bench/java compile

# rust_figure1 N: runs fencelock-bench on Redis, prints its figure 1 and sets RUST_N to its fencelock cycles/s.
rust_figure1() {
    echo "=== Rust ($1): fencelock-bench --backend redis --seconds $SECS, figure 1 ==="
    "$TARGET/fencelock-bench" --backend redis --seconds "$SECS" --redis "$FENCELOCK_TEST_REDIS" >"$WORK/rust.out" 2>&1 ||
        { cat "$WORK/rust.out" >&2; exit 1; }
    awk '/^1\. uncontended/ {on = 1; print; next} on && (/^$/ || /^[0-9]/) {exit} on' "$WORK/rust.out"
    printf -v "RUST_$1" '%s' "$(awk '/^1\. uncontended/ {on = 1} on && /^ *cycles\/s/ {sub(/\/s/, "", $2); print $2; exit}' "$WORK/rust.out")"
}

# Rust before and after Java, averaged: load from elsewhere on a shared machine then falls on both sides.
rust_figure1 1

echo
echo "=== Java (release libfencelock_jni from $TARGET) ==="
"${MVN[@]}" -f bench/java exec:exec -Dbench.library.path="$TARGET" \
    -Dbench.args="--redis $FENCELOCK_TEST_REDIS --zk $FENCELOCK_TEST_ZK --seconds $SECS" | tee "$WORK/java.out" |
    grep -v '^result '
echo
rust_figure1 2
rust=$(awk -v a="$RUST_1" -v b="$RUST_2" 'BEGIN { print (a + b) / 2 }')
java=$(sed -n 's/^result java_redis_cycles=//p' "$WORK/java.out")
redisson=$(sed -n 's/^result redisson_cycles=//p' "$WORK/java.out")
alternating=$(sed -n 's/^result java_redis_alternating_cycles=//p' "$WORK/java.out")

echo
awk -v j="$java" -v r="$rust" -v rs="$redisson" -v ja="$alternating" 'BEGIN {
    ratio = j / r
    printf "summary: Redis uncontended cycles/s: Rust %.0f (mean of the runs before and after), Java %.0f, Redisson %.0f\n", r, j, rs
    verdict = (ratio >= 0.8) ? "PASS" : "MISS"
    printf "summary: Java/Rust = %.2f (target ≥ 0.8) %s; Java/Redisson = %.2f (in alternating slices)\n", ratio, verdict, ja / rs
}'
