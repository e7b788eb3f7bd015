#!/usr/bin/env bash
# The README's demo: four workers take turns on one SQLite lock through the CLI, then the demo checks its own output
# (critical sections never overlap; fencing tokens strictly increase in order of acquisition).
#
#   scripts/demo.sh                    build the CLI, run the workers, check their output
#   FENCELOCK_DEMO_BIN=PATH scripts/demo.sh   the same with a CLI built already (scripts/test.sh passes the one of
#                                      its workspace build: `-p fencelock-cli` resolves other features, and would
#                                      compile most dependencies a second time)
#   scripts/demo.sh --check LOG [N]    only check a log of N critical sections (default 12)
set -euo pipefail

readonly WORKERS=4 ROUNDS=3 LOCK=demo-lock
BIN=
DB=
WORK=

# check_log LOG EXPECTED: reads the lines starting with "worker" and verifies the lock's history.
check_log() {
    awk -v expected="$2" -v lock="$LOCK" '
        function fail(msg) {
            printf "demo FAILED: line %d: %s\n    %s\n", NR, msg, $0 > "/dev/stderr"
            failed = 1
            exit 1
        }
        # Tokens are compared as decimal strings: awk numbers are doubles, exact only up to 2^53.
        function greater(a, b) {
            sub(/^0+/, "", a); sub(/^0+/, "", b)
            return length(a) != length(b) ? length(a) > length(b) : (a "") > (b "")
        }
        $1 != "worker" { next }
        $3 == "holds" {
            if (NF < 7 || $2 !~ /^[0-9]+$/ || $5 != "with" || $6 != "token") fail("malformed line")
            if ($4 != lock) fail("the lock is " $4 ", expected " lock)
            if (holder != "") fail("worker " $2 " holds the lock while worker " holder " still holds it")
            if ($7 !~ /^[0-9]+$/) fail("the token is not a number")
            if (sections > 0 && !greater($7, last)) fail("token " $7 " is not greater than the previous token " last)
            holder = $2; last = $7; sections++
            next
        }
        $3 == "releases" && NF == 3 {
            if (holder != $2) fail("worker " $2 " releases, but the holder is " (holder == "" ? "nobody" : "worker " holder))
            holder = ""
            next
        }
        { fail("malformed line") }
        END {
            if (failed) exit 1
            if (holder != "") { printf "demo FAILED: worker %s never released\n", holder > "/dev/stderr"; exit 1 }
            if (sections != expected) {
                printf "demo FAILED: %d critical sections, expected %d\n", sections, expected > "/dev/stderr"
                exit 1
            }
            printf "demo OK: %d critical sections, no overlap, tokens increasing\n", sections
        }
    ' "$1"
}

# worker ID: enters the critical section ROUNDS times; the command runs while the CLI holds the lock.
worker() {
    local id=$1 round
    for ((round = 1; round <= ROUNDS; round++)); do
        # shellcheck disable=SC2016 # the inner sh expands $1 and the FENCELOCK_* variables the CLI sets
        "$BIN" run --url "sqlite:$DB" --ttl 5 "$LOCK" -- sh -c '
            echo "worker $1 holds $FENCELOCK_NAME with token $FENCELOCK_TOKEN at $(date +%T.%3N)"
            sleep 0.2
            echo "worker $1 releases"' sh "$id" || {
            local rc=$?
            echo "demo: worker $id: fencelock run exited with status $rc" >&2
            return "$rc"
        }
    done
}

run_workers() {
    local id pid failed=0 pids=()
    for ((id = 1; id <= WORKERS; id++)); do
        worker "$id" &
        pids+=("$!")
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    return "$failed"
}

main() {
    if [[ ${1:-} == --check ]]; then
        check_log "$2" "${3:-$((WORKERS * ROUNDS))}"
        return
    fi
    cd "$(dirname "${BASH_SOURCE[0]}")/.."
    if [[ -n ${FENCELOCK_DEMO_BIN:-} ]]; then
        BIN=$FENCELOCK_DEMO_BIN
        [[ -x $BIN ]] || { echo "demo: FENCELOCK_DEMO_BIN=$BIN is not an executable" >&2; exit 1; }
    else
        cargo build -q -p fencelock-cli
        local target=${CARGO_TARGET_DIR:-target}
        [[ $target == /* ]] || target=$PWD/$target
        BIN=$target/debug/fencelock
    fi

    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fencelock-demo.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT # the database and the log are throwaway
    DB=$WORK/demo.db
    local log=$WORK/demo.log

    echo "$WORKERS workers x $ROUNDS rounds on lock $LOCK (sqlite:$DB)"
    # One pipe for every worker: each line is a single write, so lines arrive whole and in the order they happened.
    if ! run_workers | tee "$log"; then
        echo "demo FAILED: a worker's fencelock run failed" >&2
        exit 1
    fi
    check_log "$log" $((WORKERS * ROUNDS))
}

main "$@"
