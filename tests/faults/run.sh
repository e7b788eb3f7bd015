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
# worker on etcd's Go clients, built here into target/faults/goworker. It ignores the FENCELOCK_TEST_* servers of the other
# stages: those live in the machine's namespace, which this suite never touches.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly ROOT
readonly LOCKTEST=$ROOT/target/debug/locktest
readonly BACKENDS=${FENCELOCK_FAULTS_BACKENDS:-redis redis-sentinel redlock etcd zk postgres mysql sqlite}
# The SDK workers' languages (locktest --langs) and whether the ci runs add the Go worker: a reduced local run says so.
readonly LANGS=${FENCELOCK_FAULTS_LANGS:-rust,python,node}
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

# The fence check must be able to fail: a locktest whose core carries the fence_accepts_older_token mutant
# (core/src/mutant.rs) runs the sqlite canary with Rust workers (the venv and the addon link the normal core), and
# that run passes only if the checker caught the broken register's stale writes. Built in the normal target dir
# (only core and the suite relink) and kept aside, so target/debug/locktest stays the unmutated one.
readonly BROKEN=$ROOT/target/faults/locktest-broken-fence
build_broken_locktest() {
    local keep=$ROOT/target/faults/locktest-normal
    mkdir -p target/faults
    cp -p "$LOCKTEST" "$keep"
    FENCELOCK_MUTANT=fence_accepts_older_token cargo build -q -p fencelock-faults || return 1
    mv "$LOCKTEST" "$BROKEN"
    mv "$keep" "$LOCKTEST"
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
    [[ $LANGS == rust,python,node ]] || log "reduced run: SDK workers in $LANGS only (FENCELOCK_FAULTS_LANGS)"
    if [[ ,$LANGS, == *,python,* ]]; then
        [[ -x target/python/venv/bin/python ]] || die "no Python venv with fencelock (python/run-tests.sh makes it)"
        target/python/venv/bin/python -c 'import fencelock' || die "fencelock is not installed in target/python/venv"
    fi
    if [[ ,$LANGS, == *,node,* ]]; then
        compgen -G 'node/fencelock.*.node' >/dev/null || die "the Node addon is not built (node/run-tests.sh builds it)"
    fi
    [[ $NO_GO == 1 ]] || build_go_worker

    log "seed $SEED (FENCELOCK_FAULTS_SEED=$SEED tests/faults/run.sh repeats the schedules)"
    local failed=() runs=() b t0
    for b in $BACKENDS; do
        t0=$SECONDS
        if ! "$LOCKTEST" run --backend "$b" --profile ci --seed "$SEED" "${args[@]}"; then failed+=("$b ci"); fi
        runs+=("target/faults/$b-ci-$SEED")
        log "$b ci: $((SECONDS - t0))s"
    done
    local w
    for b in $WORKLOAD_BACKENDS; do
        for w in rwlock semaphore election; do
            t0=$SECONDS
            if ! "$LOCKTEST" run --backend "$b" --profile ci --seed "$SEED" --workload "$w" --langs "$LANGS" --no-go; then
                failed+=("$b $w ci")
            fi
            # No report when the backend lacks the primitive (locktest said so).
            [[ ! -e target/faults/$b-$w-ci-$SEED/report.json ]] || runs+=("target/faults/$b-$w-ci-$SEED")
            log "$b $w ci: $((SECONDS - t0))s"
        done
    done
    # The canary: client pauses only; it fails unless the faults make an unfenced resource go wrong. The broken
    # register's canary runs beside it (both are light: client pauses, no JVM), in a namespace of its own.
    t0=$SECONDS
    local broken_pid=
    if build_broken_locktest; then
        "$BROKEN" run --backend sqlite --profile canary --seed "$SEED" --langs rust --no-go --broken-fence \
            --out target/faults/sqlite-broken-fence-"$SEED" \
            >target/faults/sqlite-broken-fence-"$SEED".log 2>&1 &
        broken_pid=$!
    else
        failed+=("building the broken register")
    fi
    if ! "$LOCKTEST" run --backend redis --profile canary --seed "$SEED" --langs "$LANGS"; then failed+=("redis canary"); fi
    runs+=("target/faults/redis-canary-$SEED")
    if [[ -n $broken_pid ]]; then
        wait "$broken_pid" || failed+=("sqlite broken-fence canary")
        cat target/faults/sqlite-broken-fence-"$SEED".log
        runs+=("target/faults/sqlite-broken-fence-$SEED")
    fi
    log "redis canary and sqlite broken-fence canary: $((SECONDS - t0))s"

    "$LOCKTEST" table "${runs[@]}" | tee target/faults/table-"$SEED".md
    ((${#failed[@]} == 0)) || die "failed: ${failed[*]}"
}

main "$@"
