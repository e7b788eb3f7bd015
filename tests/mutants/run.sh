#!/usr/bin/env bash
# The mutation check: builds core once per deliberate bug of core/src/mutant.rs (the compile-time variable
# FENCELOCK_MUTANT selects it; normal builds carry none) and runs the server-free Rust tests against each broken build:
# the conformance scenarios on memory:// and sqlite:, the public layer on memory:// (core/tests/client.rs) and the
# SQLite tests. Every mutant must fail at least one test; the run prints which ones and exits non-zero if a mutant
# survives or the unmutated baseline fails.
#
#   tests/mutants/run.sh [MUTANT...]      default: every mutant
#
# Builds go to target/mutants (FENCELOCK_MUTANTS_TARGET), so the normal target dir never flips between variants; only
# core and its test binaries rebuild per mutant.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${FENCELOCK_MUTANTS_TARGET:-$ROOT/target/mutants}

# The names of core/src/mutant.rs, which refuses to build with any other.
ALL=(release_skips_holder_check renew_extends_lost_lease fence_accepts_older_token abort_leaves_record
    watchdog_renews_at_ttl shared_hold_keeps_gate upgrade_allowed readers_pass_waiting_writers
    lost_check_ignores_validity)
MUTANTS=("${@:-${ALL[@]}}")
TESTS=(--test conformance --test client --test sqlite)

# No served backend: the served tests skip, and the run needs no server and cannot be slowed by one.
while IFS= read -r var; do unset "$var"; done < <(compgen -e | grep -E '^FENCELOCK_(TEST_|REQUIRE_SERVICES$|URL$)' || true)
unset FENCELOCK_MUTANT

now_ms() { echo $((${EPOCHREALTIME//[!0-9]/} / 1000)); }

# run MUTANT: the tests against a build with MUTANT ("" = none); sets FAILED (binary::test [scenarios], …), STATUS.
run() {
    local log=$CARGO_TARGET_DIR/mutant-${1:-baseline}.log rc=0
    mkdir -p "$CARGO_TARGET_DIR"
    env ${1:+FENCELOCK_MUTANT="$1"} timeout 900 cargo test -p fencelock "${TESTS[@]}" --no-fail-fast >"$log" 2>&1 ||
        rc=$?
    # Which tests failed, and for a conformance test which scenarios (its matrix row is printed on failure).
    FAILED=$(awk '
        /^ *Running tests\// { bin = $2; sub(/^tests\//, "", bin); sub(/\.rs$/, "", bin) }
        /^test .* \.\.\. FAILED$/ { t = bin "::" $2; order[++n] = t }
        /conformance matrix row: rust × / {
            split($0, parts, "× "); split(parts[2], kv, ": "); s = ""
            m = split(kv[2], cells, " ")
            for (i = 1; i <= m; i++) if (cells[i] ~ /=FAIL$/) { c = cells[i]; sub(/=FAIL$/, "", c); s = s (s ? ", " : "") c }
            if (s) scen["conformance::" kv[1]] = " [" s "]"
        }
        END { for (i = 1; i <= n; i++) printf "%s%s%s", (i > 1 ? ", " : ""), order[i], scen[order[i]] }
    ' "$log")
    if grep -qE '^error(\[E[0-9]+\])?: ' "$log" && ! grep -q '^test result' "$log"; then
        STATUS="build failed (see $log)"
    elif ((rc == 0)); then
        STATUS=passed
    elif [[ -n $FAILED ]]; then
        STATUS=failed
    else
        STATUS="exit $rc without a failed test (see $log)"
    fi
}

T0=$(now_ms)
# FENCELOCK_MUTANTS_BASELINE=0: the caller has just run these tests on the unmutated build (the test command's test
# stage runs the whole workspace's), so the baseline would only repeat them.
if [[ ${FENCELOCK_MUTANTS_BASELINE:-1} == 0 ]]; then
    printf -- '--- baseline: skipped (FENCELOCK_MUTANTS_BASELINE=0: the unmutated tests passed before this run)\n'
else
    printf -- '--- baseline: no mutant\n'
    run ""
    if [[ $STATUS != passed ]]; then
        echo "mutants: the unmutated build fails ($STATUS: $FAILED); fix that first, the table would mean nothing" >&2
        exit 2
    fi
fi

ROWS=()
SURVIVED=0
for m in "${MUTANTS[@]}"; do
    t=$(now_ms)
    printf -- '--- mutant %s\n' "$m"
    run "$m"
    secs=$((($(now_ms) - t) / 1000))
    case $STATUS in
    failed) ROWS+=("$m|$FAILED|caught (${secs}s)") ;;
    passed) ROWS+=("$m|-|SURVIVED (${secs}s)") && SURVIVED=$((SURVIVED + 1)) ;;
    *) ROWS+=("$m|-|ERROR: $STATUS") && SURVIVED=$((SURVIVED + 1)) ;;
    esac
done

printf '\n%-28s | %s | %s\n' mutant 'caught by (tests)' result
for row in "${ROWS[@]}"; do
    IFS='|' read -r m by res <<<"$row"
    printf '%-28s | %s | %s\n' "$m" "$by" "$res"
done
printf 'mutants: %d of %d caught in %ds\n' $((${#MUTANTS[@]} - SURVIVED)) "${#MUTANTS[@]}" $((($(now_ms) - T0) / 1000))
((SURVIVED == 0))
