#!/usr/bin/env bash
# The project's test command: start the test servers, build, test, lint, run the demo, stop the servers.
# Each stage prints a header and its time; the first failing stage ends the run with that stage's exit status.
# A new stage (Python, Node, JVM, C) is one more `stage NAME CMD...` line in main.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT SERVICES_DIR=$ROOT/.services

STAGE_NAMES=()
STAGE_TIMES=()
STAGE_RESULTS=()
SKIPPED=()
CURRENT_STAGE=
CURRENT_T0=0
RUN_T0=0

now_ms() { echo $((${EPOCHREALTIME//[!0-9]/} / 1000)); } # [!0-9]: the decimal point follows the locale
seconds() { printf '%d.%ds' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# stage NAME CMD...: run CMD under a header. A failure exits through errexit; on_exit then marks the stage FAILED.
stage() {
    CURRENT_STAGE=$1
    shift
    printf '\n==> %s: %s\n' "$CURRENT_STAGE" "$*"
    CURRENT_T0=$(now_ms)
    "$@"
    end_stage ok
}

end_stage() {
    local ms=$(($(now_ms) - CURRENT_T0))
    STAGE_NAMES+=("$CURRENT_STAGE")
    STAGE_TIMES+=("$ms")
    STAGE_RESULTS+=("$1")
    printf '<== %s: %s in %s\n' "$CURRENT_STAGE" "$1" "$(seconds "$ms")"
    CURRENT_STAGE=
}

# skip NAME REASON: a stage that cannot run here. Under CI every stage must run, so there a skip fails the run.
skip() {
    printf '\n==> %s: skipped (%s)\n' "$1" "$2"
    STAGE_NAMES+=("$1")
    STAGE_TIMES+=(0)
    if [[ ${CI:-} == true ]]; then
        STAGE_RESULTS+=("FAILED: skipped under CI ($2)")
        echo "$1: a stage may not be skipped under CI=true" >&2
        exit 1
    fi
    STAGE_RESULTS+=("skipped: $2")
    SKIPPED+=("$1")
}

summary() {
    local i
    printf '\n==== stages ====\n'
    for i in "${!STAGE_NAMES[@]}"; do
        printf '%-10s %8s  %s\n' "${STAGE_NAMES[i]}" "$(seconds "${STAGE_TIMES[i]}")" "${STAGE_RESULTS[i]}"
    done
    printf '%-10s %8s\n' total "$(seconds $(($(now_ms) - RUN_T0)))"
}

on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $CURRENT_STAGE ]]; then end_stage "FAILED (exit $rc)"; fi
    # Also after a failure or Ctrl-C: nothing started here may outlive the run.
    printf '\n==> stopping services\n'
    if ! "$ROOT/scripts/services.sh" stop "$SERVICES_DIR"; then ((rc)) || rc=1; fi
    summary
    if ((rc != 0)); then
        echo "FAILED (exit $rc)"
    elif ((${#SKIPPED[@]})); then
        echo "passed, but ${#SKIPPED[@]} stage(s) did not run: ${SKIPPED[*]}"
    else
        echo "all stages passed"
    fi
    exit "$rc"
}

have_cargo_tool() { cargo "$1" --version >/dev/null 2>&1; }

ensure_rust_components() {
    if { ! have_cargo_tool clippy || ! have_cargo_tool fmt; } && command -v rustup >/dev/null; then
        rustup component add clippy rustfmt || echo "note: could not add clippy/rustfmt with rustup"
    fi
}

main() {
    cd "$ROOT"
    RUN_T0=$(now_ms)
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    stage services "$ROOT/scripts/services.sh" start "$SERVICES_DIR"
    # shellcheck source=/dev/null # written by services.sh start
    source "$SERVICES_DIR/env"
    export FENCELOCK_REQUIRE_SERVICES=1 # a test whose server is missing fails instead of skipping
    ensure_rust_components

    # The README's first command right after the build, on the build's CLI: a broken demo fails the run before the
    # long suites.
    stage build cargo build --workspace --all-targets
    stage demo env FENCELOCK_DEMO_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/fencelock" "$ROOT/scripts/demo.sh"
    stage test cargo test --workspace --no-fail-fast
    stage python python/run-tests.sh
    stage node env FENCELOCK_NODE_PREBUILT="${CARGO_TARGET_DIR:-$ROOT/target}/debug/libfencelock_node.so" node/run-tests.sh
    stage jvm jvm/run-tests.sh
    stage c ffi/tests/run.sh
    stage server server/run-tests.sh
    stage faults tests/faults/run.sh
    # Every deliberate bug of core/src/mutant.rs must fail a test. In the build stage's target dir, so only core and
    # its tests rebuild; after every stage that runs the normal build's binaries. No baseline: the test stage ran
    # the same tests on the unmutated build.
    stage mutants env FENCELOCK_MUTANTS_TARGET="$ROOT/target" FENCELOCK_MUTANTS_BASELINE=0 tests/mutants/run.sh
    if have_cargo_tool clippy; then
        stage clippy cargo clippy --workspace --all-targets -- -D warnings
    else
        skip clippy "clippy is not installed"
    fi
    if have_cargo_tool fmt; then
        stage fmt cargo fmt --all --check
    else
        skip fmt "rustfmt is not installed"
    fi
}

main "$@"
