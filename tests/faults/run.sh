#!/usr/bin/env bash
# The faults stage: the Jepsen-style safety suite (tests/faults/README.md). One `ci` run per backend, each in a private
# network namespace of its own with its own servers; fails if any run fails an assertion. Then the rwlock, semaphore
# and election workloads in ci on Redis, etcd, ZooKeeper and PostgreSQL (FENCELOCK_FAULTS_WORKLOAD_BACKENDS), the
# `canary` run, and a canary on a deliberately broken fence register that must be caught.
#
#   tests/faults/run.sh                    every backend, a random seed (printed; FENCELOCK_FAULTS_SEED=N to repeat)
#   FENCELOCK_FAULTS_BACKENDS="redis zk" tests/faults/run.sh
#   FENCELOCK_FAULTS_LANGS=rust FENCELOCK_FAULTS_NO_GO=1 tests/faults/run.sh   without the venv, the addon and Go
#
# Needs root (unshare -n), the debug build of the workspace (locktest, fencelockd), the Python venv (target/python/venv)
# and the Node addon (node/), which the earlier stages of scripts/test.sh make, and Go (/usr/local/go/bin/go) for the
# worker on etcd's Go clients, built here into target/faults/goworker, as is the C worker (gcc, libjansson-dev,
# the build's libfencelock_ffi.so) into target/faults/cworker. It ignores the FENCELOCK_TEST_* servers of the other
# stages: those live in the machine's namespace, which this suite never touches.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly ROOT
readonly LOCKTEST=$ROOT/target/debug/locktest
readonly BACKENDS=${FENCELOCK_FAULTS_BACKENDS:-redis redis-cluster redis-sentinel redlock redlock5 etcd zk postgres mysql sqlite}
# The SDK workers' languages (locktest --langs) and whether the ci runs add the Go worker: a reduced local run says so.
readonly LANGS=${FENCELOCK_FAULTS_LANGS:-rust,python,node,c,java}
readonly NO_GO=${FENCELOCK_FAULTS_NO_GO:-0}
readonly SEED=${FENCELOCK_FAULTS_SEED:-$((RANDOM * 32768 + RANDOM))}
# The read-write lock, semaphore and election workloads (ci, no Go worker: etcd's lock API has none). A backend whose
# capability() lacks the primitive is skipped by locktest with its reason.
readonly WORKLOAD_BACKENDS=${FENCELOCK_FAULTS_WORKLOAD_BACKENDS:-redis etcd zk postgres}

log() { printf 'faults: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# Packages only this suite needs (the services stage installs the servers): libfaketime, ip/unshare.
ensure_packages() {
    local missing=()
    [[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]] || missing+=(faketime)
    command -v ip >/dev/null || missing+=(iproute2)
    command -v unshare >/dev/null || missing+=(util-linux)
    [[ -f /usr/include/jansson.h ]] || missing+=(libjansson-dev)
    ((${#missing[@]})) || return 0
    local sudo=()
    ((EUID == 0)) || sudo=(sudo)
    log "installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The Go worker: server/tests/go's program (etcd's clientv3 + v3lockpb, from the Go module proxy) in faults-worker mode.
build_go_worker() {
    export PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null || die "go not found (expected /usr/local/go/bin/go): the ci runs need the Go worker"
    mkdir -p target/faults
    # -buildvcs=false: a fresh clone's git metadata is not the program's concern; GOTOOLCHAIN=local: never fetch a Go.
    (cd server/tests/go && GOTOOLCHAIN=local go build -buildvcs=false -o "$ROOT/target/faults/goworker" .) ||
        die "building the Go worker (server/tests/go) failed"
}

# The C worker: workers/worker.c on the C API, linked to the build's libfencelock_ffi.so; jansson parses the
# referee's replies (libjansson-dev, which the C stage installs too).
build_c_worker() {
    local lib=$ROOT/target/debug
    [[ -e $lib/libfencelock_ffi.so ]] || cargo build -q -p fencelock-ffi || die "building libfencelock_ffi failed"
    mkdir -p target/faults
    gcc -std=c11 -O1 -g -Wall -Wextra -Werror -I"$ROOT/ffi/include" tests/faults/workers/worker.c \
        -o target/faults/cworker -L"$lib" -lfencelock_ffi "-Wl,-rpath,$lib" -pthread -ljansson ||
        die "building the C worker (tests/faults/workers/worker.c) failed"
}

# The fence check must be able to fail: a locktest whose core carries the fence_accepts_older_token mutant
# (core/src/mutant.rs) runs the sqlite canary with Rust workers (the venv and the addon link the normal core), and
# that run passes only if the checker caught the broken register's stale writes. Built in the normal target dir
# (only core and the suite relink) and kept aside, so target/debug/locktest stays the unmutated one.
# The JVM worker: Worker.java compiled against the jar jvm/run-tests.sh built, and a launcher that loads the build's
# libfencelock_jni.so from target/debug (the jar's bundled copy would be extracted to /tmp by every worker, and a
# killed worker leaves it there). C1 only and the serial collector: a worker lives seconds to a minute, on 2 cores.
build_java_worker() {
    local jar dir=$ROOT/target/faults/jworker
    jar=$(compgen -G "$ROOT/jvm/target/fencelock-*.jar" | grep -E "/fencelock-[0-9.]+\.jar$" | head -1) ||
        die "no fencelock jar in jvm/target (jvm/run-tests.sh builds it)"
    [[ -e $ROOT/target/debug/libfencelock_jni.so ]] || die "no target/debug/libfencelock_jni.so (the build stage makes it)"
    rm -rf "$dir" && mkdir -p "$dir"
    javac -Xlint:all -Werror -d "$dir" -cp "$jar" tests/faults/workers/Worker.java ||
        die "building the JVM worker (tests/faults/workers/Worker.java) failed"
    cat >"$dir/worker" <<LAUNCHER
#!/bin/sh
exec java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss512k -Djava.library.path="$ROOT/target/debug" \\
    -cp "$dir:$jar" Worker "\$@"
LAUNCHER
    chmod +x "$dir/worker"
}

readonly BROKEN=$ROOT/target/faults/locktest-broken-fence
build_broken_locktest() {
    local keep=$ROOT/target/faults/locktest-normal
    mkdir -p target/faults
    # Copies, not renames: cargo hard-links target/debug/locktest to its deps/ artifact, which a second run's
    # (fresh) mutant build links again, so BROKEN and LOCKTEST may already be the same file.
    cp -p "$LOCKTEST" "$keep" || return 1
    FENCELOCK_MUTANT=fence_accepts_older_token cargo build -q -p fencelock-faults || return 1
    rm -f "$BROKEN" && cp -p "$LOCKTEST" "$BROKEN" || return 1
    rm -f "$LOCKTEST" && mv "$keep" "$LOCKTEST"
}

# The runs, JOBS at a time: each has its own network namespace and servers, and spends most of its time waiting
# on TTLs and faults (a zk run with three JVMs used 0.2 of a core), so lanes cut the stage's time, not its margins.
# A run's output goes to its log, printed whole when it ends; the table lists the runs that wrote a report (a
# backend whose capability() lacks the workload's primitive writes none: locktest said why).
readonly JOBS=${FENCELOCK_FAULTS_JOBS:-3}
declare -A RUNNING=() # pid -> "name|dir|t0"
DIRS=()
FAILED=()

job() {
    local name=$1 dir=$2
    shift 2
    while ((${#RUNNING[@]} >= JOBS)); do reap; done
    mkdir -p target/faults
    "$@" >"$dir.log" 2>&1 &
    RUNNING[$!]="$name|$dir|$SECONDS"
    DIRS+=("$dir")
}

reap() {
    local pid rc=0
    wait -n -p pid "${!RUNNING[@]}" || rc=$?
    local name dir t0
    IFS='|' read -r name dir t0 <<<"${RUNNING[$pid]}"
    unset "RUNNING[$pid]"
    cat "$dir.log"
    ((rc == 0)) || FAILED+=("$name")
    if ((rc == 0)); then log "$name: $((SECONDS - t0))s"; else log "$name: $((SECONDS - t0))s, failed (exit $rc)"; fi
}

main() {
    cd "$ROOT"
    ((EUID == 0)) || die "the suite needs root for its private network namespace (unshare -n)"
    ensure_packages
    local args=(--langs "$LANGS")
    if [[ $NO_GO == 1 ]]; then
        args+=(--no-go)
        log "reduced run: no Go worker (FENCELOCK_FAULTS_NO_GO=1)"
        [[ -x $LOCKTEST ]] || cargo build -p fencelock-faults
    else
        [[ -x $LOCKTEST && -x target/debug/fencelockd ]] || cargo build -p fencelock-faults -p fencelockd
    fi
    [[ $LANGS == rust,python,node,c,java ]] || log "reduced run: SDK workers in $LANGS only (FENCELOCK_FAULTS_LANGS)"
    if [[ ,$LANGS, == *,python,* ]]; then
        [[ -x target/python/venv/bin/python ]] || die "no Python venv with fencelock (python/run-tests.sh makes it)"
        target/python/venv/bin/python -c 'import fencelock' || die "fencelock is not installed in target/python/venv"
    fi
    if [[ ,$LANGS, == *,node,* ]]; then
        compgen -G 'node/fencelock.*.node' >/dev/null || die "the Node addon is not built (node/run-tests.sh builds it)"
    fi
    [[ $NO_GO == 1 ]] || build_go_worker
    [[ ,$LANGS, != *,c,* ]] || build_c_worker
    [[ ,$LANGS, != *,java,* ]] || build_java_worker

    log "seed $SEED (FENCELOCK_FAULTS_SEED=$SEED tests/faults/run.sh repeats the schedules); $JOBS runs at a time"
    # Before the first run starts: the build swaps target/debug/locktest for a moment, and runs exec it.
    local broken=1 b w
    build_broken_locktest || { broken= && FAILED+=("building the broken register"); }
    for b in $BACKENDS; do
        job "$b ci" "target/faults/$b-ci-$SEED" "$LOCKTEST" run --backend "$b" --profile ci --seed "$SEED" "${args[@]}"
    done
    for b in $WORKLOAD_BACKENDS; do
        for w in rwlock semaphore election; do
            job "$b $w ci" "target/faults/$b-$w-ci-$SEED" "$LOCKTEST" run --backend "$b" --profile ci --seed "$SEED" \
                --workload "$w" --langs "$LANGS" --no-go
        done
    done
    # Two faults at once: each step of the ci menu with a background fault on a client's links or clock.
    job "etcd mixed" "target/faults/etcd-mixed-$SEED" "$LOCKTEST" run --backend etcd --profile mixed --seed "$SEED" \
        "${args[@]}"
    # The canary: client pauses only; it fails unless the faults make an unfenced resource go wrong.
    job "redis canary" "target/faults/redis-canary-$SEED" "$LOCKTEST" run --backend redis --profile canary \
        --seed "$SEED" --langs "$LANGS"
    # The known-bad skew: a majority of the Redlock instances jumped forward, so two clients hold at once; the
    # unfenced resource must break (the canary verdict) while the fence still refuses every stale write.
    job "redlock skew-majority canary" "target/faults/redlock-skew-majority-$SEED" "$LOCKTEST" run --backend redlock \
        --profile canary --faults server-clock-jump --skew-majority --seed "$SEED" --langs "$LANGS" \
        --out "target/faults/redlock-skew-majority-$SEED"
    if [[ -n $broken ]]; then
        job "sqlite broken-fence canary" "target/faults/sqlite-broken-fence-$SEED" "$BROKEN" run --backend sqlite \
            --profile canary --seed "$SEED" --langs rust --no-go --broken-fence --out "target/faults/sqlite-broken-fence-$SEED"
    fi
    while ((${#RUNNING[@]})); do reap; done

    local runs=() dir
    for dir in "${DIRS[@]}"; do [[ ! -e $dir/report.json ]] || runs+=("$dir"); done
    "$LOCKTEST" table "${runs[@]}" | tee target/faults/table-"$SEED".md
    ((${#FAILED[@]} == 0)) || die "failed: ${FAILED[*]}"
}

main "$@"
