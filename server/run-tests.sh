#!/usr/bin/env bash
# fencelockd against clients nobody here wrote: a Go program on etcd's own generated clients (clientv3 for the lease,
# v3lockpb.LockClient for Lock/Unlock, from the Go module proxy) drives fencelockd over Redis and ZooKeeper
# (FENCELOCK_TEST_REDIS, FENCELOCK_TEST_ZK), against the fencelock CLI (the Rust SDK) holding the same names on the
# same backend: exclusion both ways, fencing tokens rising across both, kill -9 of the Go program freeing the lock
# within the lease TTL, and a graceful fencelockd shutdown releasing its locks at once. Then, with the test PKI
# (FENCELOCK_TEST_CA, _CLIENT_CERT/_KEY, _OTHER_CERT/_KEY, _ROGUE_CERT/_KEY), the same Go client over TLS and mutual
# TLS (clientv3's Config.TLS): clients without a certificate or with the wrong CA's refused, and a second identity
# refused every use of the first one's lease; and with a users file (--users), etcd's password authentication
# (clientv3's Username and Password) with the same refusal between two users. Last, `--metrics-listen`'s scrape after
# the Go client's calls, parsed by a real Prometheus parser (prometheus_client's, in the Python stage's venv
# target/python/venv, else a venv of its own; installed from PyPI if missing). Prints `N passed, N failed`.
# Usage: server/run-tests.sh [--no-build]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/debug
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

cd "$ROOT"
if [[ ${1:-} != --no-build ]]; then
    # The test command's own build (a no-op there): fencelockd and the fencelock CLI.
    cargo build --workspace --all-targets --quiet
fi
for var in FENCELOCK_TEST_REDIS FENCELOCK_TEST_ZK FENCELOCK_TEST_CA FENCELOCK_TEST_CLIENT_CERT FENCELOCK_TEST_CLIENT_KEY \
    FENCELOCK_TEST_OTHER_CERT FENCELOCK_TEST_OTHER_KEY FENCELOCK_TEST_ROGUE_CERT FENCELOCK_TEST_ROGUE_KEY; do
    if [[ -z ${!var:-} ]]; then
        echo "server/run-tests.sh: $var must be set (source scripts/services.sh's env)" >&2
        exit 1
    fi
done

# Go: the toolchain in /usr/local/go, modules from the Go module proxy into Go's default module cache.
export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "server/run-tests.sh: go not found (expected /usr/local/go/bin/go)" >&2; exit 1; }
start=$(date +%s)
# -buildvcs=false: a fresh clone's git metadata is not the program's concern; GOTOOLCHAIN=local: never fetch a Go.
(cd server/tests/go && GOTOOLCHAIN=${GOTOOLCHAIN:-local} go build -buildvcs=false -o "$WORK/goclient" .)
echo "go client built in $(($(date +%s) - start)) s"

FENCELOCKD=$TARGET/fencelockd
CLI=$TARGET/fencelock
TTL=3 # the etcd lease TTL the Go program asks for, in seconds
PASSED=0
FAILED=0

check() { # check NAME CONDITION-COMMAND...: one counted assertion
    local name=$1
    shift
    if "$@"; then
        PASSED=$((PASSED + 1))
        echo "ok   $name"
    else
        FAILED=$((FAILED + 1))
        echo "FAIL $name"
    fi
}

# wait_for FILE REGEX SECONDS: until a line of FILE matches (bounded).
wait_for() {
    local deadline=$(($(date +%s%N) + $3 * 1000000000))
    until grep -qE "$2" "$1" 2>/dev/null; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.02
    done
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start_daemon BACKEND LOG [ARGS...]: starts fencelockd on a free port; sets ADDR and DAEMON.
start_daemon() {
    "$FENCELOCKD" --listen 127.0.0.1:0 --backend "$1" "${@:3}" >"$2.out" 2>"$2" &
    DAEMON=$!
    PIDS+=("$DAEMON")
    wait_for "$2.out" '^listening on ' 10 || { cat "$2"; return 1; }
    ADDR=$(sed -n 's/^listening on //p' "$2.out")
}

# go_hold NAME OUT [ARGS...]: the Go program takes NAME and holds it until killed; sets GO.
go_hold() {
    "$WORK/goclient" -endpoint "$ADDR" -name "$1" -ttl "$TTL" -mode hold "${@:3}" >"$2" 2>&1 &
    GO=$!
    PIDS+=("$GO")
    wait_for "$2" '^LOCKED ' 15
}

rev_of() { sed -nE 's/^LOCKED key=.* rev=([0-9]+)$/\1/p' "$1" | tail -n1; }

suite() { # suite LABEL BACKEND-URL
    local label=$1 url=$2 name="fencelockd-go-$1-$RANDOM$RANDOM" log="$WORK/$1-daemon.log"
    echo "--- $label ($url)"
    start_daemon "$url" "$log"

    # Lock, Unlock and Revoke through etcd's clients.
    local out rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" -name "$name" -ttl "$TTL" -mode worker -iterations 3 2>&1) || rc=$?
    check "$label: the Go client locks and unlocks 3 times, tokens rising" \
        bash -c '[[ $1 == 0 ]] && [[ $(grep -c "^UNLOCKED" <<<"$2") == 3 ]] &&
            sed -nE "s/.* rev=([0-9]+)$/\1/p" <<<"$2" | sort -nc' _ "$rc" "$out"

    # etcd's v3electionpb client: campaign, leader, proclaim, observe, a rival excluded, resign.
    rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" -name "$name-election" -ttl "$TTL" -mode elect -value "go-$label" 2>&1) ||
        rc=$?
    check "$label: the Go v3election client campaigns, proclaims, observes, excludes a rival and resigns" \
        bash -c '[[ $1 == 0 ]] && for l in LEADER PROCLAIMED OBSERVED EXCLUDED RESIGNED "NO LEADER"; do
            grep -q "^$l" <<<"$2" || exit 1; done' _ "$rc" "$out"

    # The Go client holds: the SDK is excluded.
    go_hold "$name" "$WORK/$label-go1.out"
    local go_rev sdk_rc=0
    go_rev=$(rev_of "$WORK/$label-go1.out")
    "$CLI" run --url "$url" --timeout 1 "$name" -- true 2>/dev/null || sdk_rc=$?
    check "$label: a Go client's lock excludes the SDK (fencelock run times out: exit $sdk_rc)" test "$sdk_rc" = 124

    # kill -9 of the Go client: its keep-alives stop, the lease expires, the lock is released within the TTL.
    kill -9 "$GO"
    wait "$GO" 2>/dev/null || true
    local t0 t1 token_file="$WORK/$label-token"
    t0=$(now_ms)
    sdk_rc=0
    "$CLI" run --url "$url" --timeout $((TTL * 3)) "$name" -- sh -c 'echo "$FENCELOCK_TOKEN" >"$1"' _ "$token_file" || sdk_rc=$?
    t1=$(now_ms)
    # The bound: the lease TTL, plus 1 s for the CLI to start, connect and be woken by the release.
    check "$label: kill -9 of the Go client frees the lock within the ${TTL}s lease TTL (SDK got it after $((t1 - t0)) ms)" \
        test "$sdk_rc" = 0 -a $((t1 - t0)) -le $((TTL * 1000 + 1000))
    check "$label: the SDK's token ($(cat "$token_file" 2>/dev/null)) is above the Go client's ($go_rev)" \
        test "$(cat "$token_file" 2>/dev/null || echo 0)" -gt "${go_rev:-0}"

    # The SDK holds: the Go client is excluded, then gets the lock once the SDK lets go, with a higher token.
    local held="$WORK/$label-sdk-held" sdk_token
    "$CLI" run --url "$url" "$name" -- sh -c 'echo "$FENCELOCK_TOKEN" >"$1"; exec sleep 60' _ "$held" &
    local sdk=$!
    PIDS+=("$sdk")
    wait_for "$held" '^[0-9]+$' 15
    sdk_token=$(cat "$held")
    rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" -name "$name" -ttl "$TTL" -mode hold -hold 10ms -wait 1s \
        2>"$WORK/$label-excluded.err") || rc=$?
    check "$label: the SDK's lock excludes a Go client (Lock gives up: exit $rc, $out$(head -c 300 "$WORK/$label-excluded.err"))" \
        test "$rc" = 3 -a "$out" = TIMEOUT
    "$WORK/goclient" -endpoint "$ADDR" -name "$name" -ttl "$TTL" -mode hold -hold 10ms >"$WORK/$label-go2.out" 2>&1 &
    local waiter=$!
    PIDS+=("$waiter")
    kill -TERM "$sdk" # the CLI releases on SIGTERM
    rc=0
    wait "$waiter" || rc=$?
    check "$label: the waiting Go client gets the lock when the SDK releases, token $(rev_of "$WORK/$label-go2.out") > $sdk_token" \
        test "$rc" = 0 -a "$(rev_of "$WORK/$label-go2.out")" -gt "$sdk_token"

    # Graceful shutdown: fencelockd revokes its leases, so the lock is free at once, not a TTL later.
    TTL=30 go_hold "$name" "$WORK/$label-go3.out"
    kill -TERM "$DAEMON"
    rc=0
    wait "$DAEMON" || rc=$?
    sdk_rc=0
    "$CLI" run --url "$url" --timeout 2 "$name" -- true 2>/dev/null || sdk_rc=$?
    check "$label: SIGTERM to fencelockd (exit $rc) releases a 30 s lease's lock at once (SDK exit $sdk_rc)" \
        test "$rc" = 0 -a "$sdk_rc" = 0
    kill -9 "$GO" 2>/dev/null || true
    wait "$GO" 2>/dev/null || true
    check "$label: fencelockd's JSON log records the expiry of the killed client's lease" \
        grep -q '"message":"lease expired: no keep-alive within its TTL"' "$log"
}

# go_refused LABEL ARGS...: one Go client with ARGS must fail to lock (the TLS handshake refused).
go_refused() {
    local label=$1 rc=0 out
    shift
    out=$("$WORK/goclient" -endpoint "$ADDR" -name "fencelockd-go-refused-$RANDOM" -ttl "$TTL" -mode worker "$@" 2>&1) ||
        rc=$?
    check "$label (exit $rc: $(tail -n1 <<<"$out" | cut -c1-120))" test "$rc" != 0 -a "$(grep -c '^LOCKED' <<<"$out")" = 0
}

tls_suite() { # over Redis: TLS, then mutual TLS with two identities
    local url=$FENCELOCK_TEST_REDIS name="fencelockd-go-tls-$RANDOM$RANDOM" log="$WORK/tls-daemon.log" out rc
    local tls_dir server_tls ca=(-tls-ca "$FENCELOCK_TEST_CA")
    tls_dir=$(dirname "$FENCELOCK_TEST_CA")
    server_tls=(--tls-cert "$tls_dir/server.pem" --tls-key "$tls_dir/server.key")
    local client=("${ca[@]}" -tls-cert "$FENCELOCK_TEST_CLIENT_CERT" -tls-key "$FENCELOCK_TEST_CLIENT_KEY")
    local other=("${ca[@]}" -tls-cert "$FENCELOCK_TEST_OTHER_CERT" -tls-key "$FENCELOCK_TEST_OTHER_KEY")
    local rogue=("${ca[@]}" -tls-cert "$FENCELOCK_TEST_ROGUE_CERT" -tls-key "$FENCELOCK_TEST_ROGUE_KEY")
    echo "--- tls ($url)"

    start_daemon "$url" "$log" "${server_tls[@]}"
    rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" "${ca[@]}" -name "$name" -ttl "$TTL" -mode worker -iterations 2 2>&1) || rc=$?
    check "tls: the Go client locks and unlocks over TLS" \
        test "$rc" = 0 -a "$(grep -c '^UNLOCKED' <<<"$out")" = 2
    go_refused "tls: a plaintext Go client is refused by a TLS fencelockd"
    kill -TERM "$DAEMON"
    wait "$DAEMON" || true

    start_daemon "$url" "$log.mtls" "${server_tls[@]}" --client-ca "$FENCELOCK_TEST_CA"
    rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" "${client[@]}" -name "$name" -ttl "$TTL" -mode worker 2>&1) || rc=$?
    check "mtls: the Go client with a certificate the CA signed locks and unlocks" \
        test "$rc" = 0 -a "$(grep -c '^UNLOCKED' <<<"$out")" = 1
    go_refused "mtls: a Go client without a certificate is refused" "${ca[@]}"
    go_refused "mtls: a Go client whose certificate the wrong CA signed is refused" "${rogue[@]}"

    # Identity fencelock-client holds a lock; identity fencelock-other tries its lease every way.
    go_hold "$name" "$WORK/tls-go1.out" "${client[@]}"
    local key
    key=$(sed -nE 's/^LOCKED key=(.*) rev=[0-9]+$/\1/p' "$WORK/tls-go1.out")
    rc=0
    out=$("$WORK/goclient" -endpoint "$ADDR" "${other[@]}" -mode foreign -victim "$key" 2>&1) || rc=$?
    check "mtls: another identity is PERMISSION_DENIED on the lease of $key ($(grep -c '^DENIED' <<<"$out") of 5 calls)" \
        test "$rc" = 0 -a "$(grep -c '^DENIED' <<<"$out")" = 5
    [[ $rc == 0 ]] || echo "$out"
    local sdk_rc=0
    "$CLI" run --url "$url" --timeout 1 "$name" -- true 2>/dev/null || sdk_rc=$?
    check "mtls: the lock is still held after the foreign calls (fencelock run times out: exit $sdk_rc)" \
        test "$sdk_rc" = 124
    kill -9 "$GO"
    wait "$GO" 2>/dev/null || true
    kill -TERM "$DAEMON"
    wait "$DAEMON" || true
}

users_suite() { # over Redis, plaintext: etcd's Auth.Authenticate with a users file
    local url=$FENCELOCK_TEST_REDIS name="fencelockd-go-users-$RANDOM$RANDOM" file="$WORK/users" out rc key
    echo "--- users ($url)"
    { echo alice-pw | "$FENCELOCKD" --hash-password alice && echo bob-pw | "$FENCELOCKD" --hash-password bob; } >"$file"
    start_daemon "$url" "$WORK/users-daemon.log" --users "$file"
    rc=0
    out=$(FENCELOCK_GO_PASSWORD=alice-pw "$WORK/goclient" -endpoint "$ADDR" -user alice -name "$name" -ttl "$TTL" \
        -mode worker 2>&1) || rc=$?
    check "users: the Go client authenticated as alice locks and unlocks" \
        test "$rc" = 0 -a "$(grep -c '^UNLOCKED' <<<"$out")" = 1
    FENCELOCK_GO_PASSWORD=bob-pw go_refused "users: a wrong password is refused" -user alice
    go_refused "users: a client without credentials is refused"
    FENCELOCK_GO_PASSWORD=alice-pw go_hold "$name" "$WORK/users-go1.out" -user alice
    key=$(sed -nE 's/^LOCKED key=(.*) rev=[0-9]+$/\1/p' "$WORK/users-go1.out")
    rc=0
    out=$(FENCELOCK_GO_PASSWORD=bob-pw "$WORK/goclient" -endpoint "$ADDR" -user bob -mode foreign -victim "$key" 2>&1) ||
        rc=$?
    check "users: bob is PERMISSION_DENIED on alice's lease ($(grep -c '^DENIED' <<<"$out") of 5 calls)" \
        test "$rc" = 0 -a "$(grep -c '^DENIED' <<<"$out")" = 5
    [[ $rc == 0 ]] || echo "$out"
    kill -9 "$GO"
    wait "$GO" 2>/dev/null || true
    kill -TERM "$DAEMON"
    wait "$DAEMON" || true
}

# A venv with prometheus_client: the Python stage's (it makes target/python/venv afresh each run), else our own.
prometheus_python() {
    local venv=$ROOT/target/python/venv
    [[ -x $venv/bin/python ]] || venv=$ROOT/target/server/venv
    [[ -x $venv/bin/python ]] || python3 -m venv "$venv" >&2
    "$venv/bin/python" -c 'import prometheus_client' 2>/dev/null ||
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check prometheus_client >&2
    echo "$venv/bin/python"
}

metrics_suite() { # over Redis: the Go client's calls, then GET /metrics through prometheus_client's parser
    local url=$FENCELOCK_TEST_REDIS name="fencelockd-go-metrics-$RANDOM$RANDOM" log="$WORK/metrics-daemon.log" py rc
    echo "--- metrics ($url)"
    py=$(prometheus_python)
    start_daemon "$url" "$log" --metrics-listen 127.0.0.1:0
    wait_for "$log.out" '^metrics on ' 10
    local at
    at=$(sed -n 's/^metrics on //p' "$log.out")
    "$WORK/goclient" -endpoint "$ADDR" -name "$name" -ttl "$TTL" -mode worker -iterations 2 >/dev/null 2>&1 || true
    rc=0
    "$py" - "http://$at/metrics" >"$WORK/metrics.check" 2>&1 <<'PY' || rc=$?
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
families = {f.name: f for f in text_string_to_metric_families(text)}
def value(family, sample, **labels):
    return sum(s.value for s in families[family].samples if s.name == sample and s.labels == labels)
calls = value("fencelockd_grpc_requests", "fencelockd_grpc_requests_total", method="v3lockpb.Lock/Lock", code="Ok")
unlocks = value("fencelockd_grpc_requests", "fencelockd_grpc_requests_total", method="v3lockpb.Lock/Unlock", code="Ok")
acquired = value("fencelock_acquire_wait_seconds", "fencelock_acquire_wait_seconds_count", backend="redis",
                 outcome="acquired")
assert families["fencelockd_grpc_requests"].type == "counter", families["fencelockd_grpc_requests"].type
assert families["fencelock_backend_op_seconds"].type == "histogram"
assert calls == 2 and unlocks == 2, (calls, unlocks)
assert acquired == 2, acquired
print(f"{len(families)} families; Lock OK {calls:g}, Unlock OK {unlocks:g}, acquired {acquired:g}")
PY
    check "metrics: prometheus_client parses /metrics: $(tail -n1 "$WORK/metrics.check")" test "$rc" = 0
    kill -TERM "$DAEMON"
    wait "$DAEMON" || true
}

suite redis "$FENCELOCK_TEST_REDIS"
suite zk "$FENCELOCK_TEST_ZK"
tls_suite
users_suite
metrics_suite

echo "server: $PASSED passed, $FAILED failed"
((FAILED == 0))
