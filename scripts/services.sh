#!/usr/bin/env bash
# Throwaway servers for the tests, on 127.0.0.1 and free ports, started as plain background processes (no systemd).
#
#   scripts/services.sh start [DIR]   DIR defaults to $PWD/.services; then: source DIR/env
#   scripts/services.sh stop  [DIR]   stops only the processes DIR/pids records, then removes DIR
#
# FENCELOCK_SERVICES="redis redlock redis-cluster etcd zk postgres" starts a subset (default: all of them).
# DIR/env exports FENCELOCK_SERVICES_DIR and, per service started:
#   FENCELOCK_TEST_REDIS, FENCELOCK_TEST_REDLOCK, FENCELOCK_TEST_REDLOCK_PORTS, FENCELOCK_TEST_REDIS_CLUSTER,
#   FENCELOCK_TEST_ETCD, FENCELOCK_TEST_ZK, FENCELOCK_TEST_POSTGRES
set -euo pipefail

readonly ALL_SERVICES="redis redlock redis-cluster etcd zk postgres"
readonly READY_TIMEOUT=30           # seconds a server gets to answer its readiness probe
readonly STOP_TIMEOUT=10            # seconds between the polite signal and SIGKILL
readonly LAUNCH_ATTEMPTS=3          # a server that dies before it is ready (port taken in a race) gets new ports
readonly MARKER=.fencelock-services # only a directory holding this file is ever deleted
readonly ZK_CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar

DIR=
PGTMP=
PG_BIN=
PICKED=
PG_CMD=()
SELECTED=() # the services asked for: words of FENCELOCK_SERVICES
declare -A PORT=() PID=() USED_PORTS=()

log() { printf 'services: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}
now_ms() { echo $((${EPOCHREALTIME//[!0-9]/} / 1000)); } # [!0-9]: the decimal point follows the locale

# --- processes -------------------------------------------------------------------------------------------------

# Field 22 of /proc/PID/stat (start time in ticks): with the pid it identifies a process even after pid reuse.
start_time() {
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -ra fields <<<"${stat##*) }"
    echo "${fields[19]}"
}

# alive PID [START]: running and, if START is given, the same process. Zombies count as dead: stop runs in another
# process than start, so dead servers are orphans that init reaps when it gets round to it.
alive() {
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -ra fields <<<"${stat##*) }"
    [[ ${fields[0]} != Z && ${fields[0]} != X ]] || return 1
    [[ -z ${2:-} || ${fields[19]} == "$2" ]]
}

record_pid() { # NAME PID SIGNAL
    printf '%s %s %s %s\n' "$1" "$2" "$(start_time "$2" || echo gone)" "$3" >>"$DIR/pids"
}

# spawn NAME SIGNAL CMD...: run CMD in the background, logging to DIR/NAME.log, and record its pid.
spawn() {
    local name=$1 sig=$2
    shift 2
    # A session of its own: Ctrl-C in the terminal reaches only the test runner, whose trap stops servers in order.
    setsid "$@" </dev/null >>"$DIR/$name.log" 2>&1 &
    PID[$name]=$!
    record_pid "$name" "$!" "$sig"
}

log_tail() {
    local f="$DIR/$1.log"
    [[ -s $f ]] || return 0
    log "last lines of $f:"
    tail -n 30 "$f" | sed 's/^/    /' >&2
}

# --- ports -----------------------------------------------------------------------------------------------------

port_is_free() { [[ -z ${USED_PORTS[$1]:-} && -z $(ss -Htan "sport = :$1") ]]; }

# pick_port: sets PICKED to a random free port below the ephemeral range (so no outgoing connection grabs it).
pick_port() {
    local lo _ span port i
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
    span=$((lo > 11000 ? lo - 10000 : 20000))
    for ((i = 0; i < 200; i++)); do
        port=$((10000 + (RANDOM * 32768 + RANDOM) % span))
        if port_is_free "$port"; then
            USED_PORTS[$port]=1
            PICKED=$port
            return 0
        fi
    done
    die "no free port found"
}

# --- packages --------------------------------------------------------------------------------------------------

wants() { [[ " ${SELECTED[*]} " == *" $1 "* ]]; }

ensure_packages() {
    local missing=()
    command -v protoc >/dev/null || missing+=(protobuf-compiler) # etcd-client's build script needs it
    command -v ss >/dev/null || missing+=(iproute2)
    if wants redis || wants redlock || wants redis-cluster; then
        command -v redis-server >/dev/null || missing+=(redis-server)
        command -v redis-cli >/dev/null || missing+=(redis-tools)
    fi
    if wants etcd; then
        command -v etcd >/dev/null || missing+=(etcd-server)
        command -v etcdctl >/dev/null || missing+=(etcd-client)
    fi
    if wants zk; then
        [[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
        command -v nc >/dev/null || missing+=(netcat-openbsd)
    fi
    if wants postgres; then compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql); fi
    ((${#missing[@]})) || return 0

    local sudo=()
    ((EUID == 0)) || sudo=(sudo)
    log "installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# --- redis -----------------------------------------------------------------------------------------------------

launch_redis() {
    local name=$1
    pick_port
    PORT[$name]=$PICKED
    mkdir -p "$DIR/$name"
    spawn "$name" TERM redis-server --port "${PORT[$name]}" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$DIR/$name"
}

probe_redis() { [[ $(redis-cli -h 127.0.0.1 -p "${PORT[$1]}" ping 2>/dev/null) == PONG ]]; }

# --- redis cluster ---------------------------------------------------------------------------------------------

readonly CLUSTER_NODES=(cluster1 cluster2 cluster3) # three masters, no replicas: every slot has one owner

launch_cluster() {
    local name=$1
    pick_port
    PORT[$name]=$PICKED
    mkdir -p "$DIR/$name"
    rm -f "$DIR/$name/nodes.conf" # a relaunch on new ports must not find the node's old address
    spawn "$name" TERM redis-server --port "${PORT[$name]}" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$DIR/$name" --cluster-enabled yes --cluster-config-file "$DIR/$name/nodes.conf" \
        --cluster-node-timeout 5000
}

probe_cluster() { probe_redis "$1"; }

cluster_ok() { [[ $(redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null) == *cluster_state:ok* ]]; }

# Assigns the slots across the masters, then waits until every node sees the whole cluster as ok.
finish_cluster() {
    local name addrs=() deadline
    for name in "${CLUSTER_NODES[@]}"; do addrs+=("127.0.0.1:${PORT[$name]}"); done
    if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >>"$DIR/cluster.log" 2>&1; then
        log_tail cluster
        die "redis-cli --cluster create failed (see $DIR/cluster.log)"
    fi
    deadline=$((SECONDS + READY_TIMEOUT))
    for name in "${CLUSTER_NODES[@]}"; do
        until cluster_ok "${PORT[$name]}"; do
            if ((SECONDS >= deadline)); then
                log_tail "$name"
                die "$name did not report cluster_state:ok within ${READY_TIMEOUT}s"
            fi
            sleep 0.2
        done
    done
}

# --- etcd ------------------------------------------------------------------------------------------------------

launch_etcd() {
    local name=$1 client peer
    pick_port
    PORT[$name]=$PICKED
    pick_port
    client=http://127.0.0.1:${PORT[$name]}
    peer=http://127.0.0.1:$PICKED
    rm -rf "$DIR/etcd" # a relaunch on new ports must not find a member registered with the old peer URL
    spawn "$name" TERM etcd --name fencelock --data-dir "$DIR/etcd" --logger zap \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "fencelock=$peer" --initial-cluster-state new
}

probe_etcd() {
    ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:${PORT[$1]}" --dial-timeout 1s --command-timeout 2s \
        endpoint health >/dev/null 2>&1
}

# --- zookeeper -------------------------------------------------------------------------------------------------

launch_zk() {
    local name=$1 dir=$DIR/zk
    pick_port
    PORT[$name]=$PICKED
    mkdir -p "$dir/data"
    # admin.enableServer=false: otherwise Jetty binds 0.0.0.0:8080. maxClientCnxns=0: tests open many sessions.
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/data
clientPort=${PORT[$name]}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,conf
EOF
    spawn "$name" TERM java -Xmx256m -XX:+UseSerialGC -XX:-UsePerfData -cp "$ZK_CLASSPATH" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
}

probe_zk() {
    [[ $(echo ruok | nc -w 2 127.0.0.1 "${PORT[$1]}" 2>/dev/null) == imok ]] &&
        echo srvr | nc -w 2 127.0.0.1 "${PORT[$1]}" 2>/dev/null | grep -q '^Mode: '
}

# --- postgresql ------------------------------------------------------------------------------------------------

# pg_cmd CMD...: sets PG_CMD to CMD run as the postgres user (initdb and postgres refuse to run as root).
pg_cmd() {
    if ((EUID == 0)); then
        # cd /: su keeps the caller's directory, which the postgres user may not be allowed to read.
        PG_CMD=(su postgres -s /bin/bash -c "cd / && exec $(printf '%q ' "$@")")
    else
        PG_CMD=("$@")
    fi
}

init_postgres() {
    PG_BIN=$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1)
    [[ -x $PG_BIN/postgres ]] || die "no PostgreSQL server under /usr/lib/postgresql"
    # Outside the checkout, owned by postgres: the checkout may not be readable by that user.
    PGTMP=$(mktemp -d /tmp/fencelock-pg.XXXXXX)
    echo "$PGTMP" >"$DIR/pgdir"
    if ((EUID == 0)); then chown postgres: "$PGTMP"; fi
    pg_cmd "$PG_BIN/initdb" -D "$PGTMP/data" -A trust -U postgres -E UTF8 --locale=C -N
    if ! "${PG_CMD[@]}" >>"$DIR/postgres.log" 2>&1; then
        log_tail postgres
        die "initdb failed"
    fi
}

launch_postgres() {
    local name=$1
    [[ -n $PGTMP ]] || init_postgres
    pick_port
    PORT[$name]=$PICKED
    # A throwaway cluster: durability settings off for speed.
    pg_cmd "$PG_BIN/postgres" -D "$PGTMP/data" -h 127.0.0.1 -p "${PORT[$name]}" -k "$PGTMP" \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200
    # As root the spawned pid is su's; the postmaster (its child) is recorded once it has written postmaster.pid.
    if ((EUID == 0)); then spawn "$name" TERM "${PG_CMD[@]}"; else spawn "$name" INT "${PG_CMD[@]}"; fi
}

probe_postgres() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "${PORT[$1]}"; }

finish_postgres() {
    local pm
    if ((EUID == 0)); then
        pm=$(head -n 1 "$PGTMP/data/postmaster.pid")
        record_pid postgres-postmaster "$pm" INT # SIGINT = fast shutdown
    fi
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "${PORT[postgres]}" -U postgres -d postgres \
        -c 'CREATE DATABASE fencelock_test' >>"$DIR/postgres.log" 2>&1 ||
        die "could not create database fencelock_test (see $DIR/postgres.log)"
}

# --- start / stop ----------------------------------------------------------------------------------------------

kind_of() { case $1 in redlock*) echo redis ;; cluster*) echo cluster ;; *) echo "$1" ;; esac; }

# await NAME: wait for the probe; relaunch on new ports if the server died first; fail loudly at the deadline.
await() {
    local name=$1 kind attempt deadline
    kind=$(kind_of "$name")
    for ((attempt = 1; attempt <= LAUNCH_ATTEMPTS; attempt++)); do
        deadline=$((SECONDS + READY_TIMEOUT))
        while alive "${PID[$name]}"; do
            # Probe, then check it is still ours: a server that lost a port race exits, a stranger would answer.
            if "probe_$kind" "$name" && alive "${PID[$name]}"; then return 0; fi
            if ((SECONDS >= deadline)); then
                log_tail "$name"
                die "$name did not become ready on port ${PORT[$name]} within ${READY_TIMEOUT}s"
            fi
            sleep 0.2
        done
        log_tail "$name"
        log "$name exited before it was ready (attempt $attempt/$LAUNCH_ATTEMPTS)"
        ((attempt < LAUNCH_ATTEMPTS)) && "launch_$kind" "$name"
    done
    die "$name could not be started"
}

write_env() {
    local tmp=$DIR/env.tmp
    {
        printf 'export FENCELOCK_SERVICES_DIR=%q\n' "$DIR"
        if wants redis; then echo "export FENCELOCK_TEST_REDIS=\"redis://127.0.0.1:${PORT[redis]}\""; fi
        if wants redlock; then
            local p1=${PORT[redlock1]} p2=${PORT[redlock2]} p3=${PORT[redlock3]}
            echo "export FENCELOCK_TEST_REDLOCK=\"redlock://127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$p3\""
            echo "export FENCELOCK_TEST_REDLOCK_PORTS=\"$p1 $p2 $p3\""
        fi
        if wants redis-cluster; then
            local c1=${PORT[cluster1]} c2=${PORT[cluster2]} c3=${PORT[cluster3]}
            echo "export FENCELOCK_TEST_REDIS_CLUSTER=\"redis+cluster://127.0.0.1:$c1,127.0.0.1:$c2,127.0.0.1:$c3\""
        fi
        if wants etcd; then echo "export FENCELOCK_TEST_ETCD=\"etcd://127.0.0.1:${PORT[etcd]}\""; fi
        if wants zk; then echo "export FENCELOCK_TEST_ZK=\"zk://127.0.0.1:${PORT[zk]}\""; fi
        if wants postgres; then
            echo "export FENCELOCK_TEST_POSTGRES=\"postgres://postgres@127.0.0.1:${PORT[postgres]}/fencelock_test\""
        fi
    } >"$tmp"
    mv "$tmp" "$DIR/env"
}

on_start_exit() {
    local rc=$?
    ((rc == 0)) && return 0
    log "start failed; stopping what was started"
    do_stop "$DIR" || true
    exit "$rc"
}

do_start() {
    local t0 name instances=()
    t0=$(now_ms)
    if [[ -e $DIR/$MARKER ]]; then
        log "stopping what an earlier run left in $DIR"
        do_stop "$DIR"
    fi
    if [[ -d $DIR && ! -e $DIR/$MARKER && -n $(ls -A "$DIR") ]]; then
        die "$DIR exists and was not made by services.sh; refusing to use it"
    fi
    ensure_packages
    mkdir -p "$DIR"
    touch "$DIR/$MARKER"
    trap on_start_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    wants redis && instances+=(redis)
    wants redlock && instances+=(redlock1 redlock2 redlock3)
    wants redis-cluster && instances+=("${CLUSTER_NODES[@]}")
    wants etcd && instances+=(etcd)
    wants zk && instances+=(zk)
    wants postgres && instances+=(postgres) # last: its initdb runs while the JVM boots
    for name in "${instances[@]}"; do "launch_$(kind_of "$name")" "$name"; done
    for name in "${instances[@]}"; do await "$name"; done
    if wants redis-cluster; then finish_cluster; fi
    if wants postgres; then finish_postgres; fi
    write_env

    trap - EXIT INT TERM
    for name in "${instances[@]}"; do log "$name ready on 127.0.0.1:${PORT[$name]}"; done
    log "started in $(($(now_ms) - t0)) ms; now: source $DIR/env"
}

do_stop() {
    local dir=$1 name pid start sig i names=() pids=() starts=() sigs=()
    [[ -d $dir ]] || return 0
    [[ -e $dir/$MARKER ]] || die "$dir was not made by services.sh; refusing to touch it"
    if [[ -f $dir/pids ]]; then
        while read -r name pid start sig; do
            names+=("$name") pids+=("$pid") starts+=("$start") sigs+=("$sig")
        done <"$dir/pids"
    fi
    local postmaster_signalled=0
    # Newest first: the postmaster (recorded after "postgres", its su parent) is seen before su.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        alive "${pids[i]}" "${starts[i]}" || continue
        # su exits with the postmaster; signalling su as well would orphan the postmaster mid-shutdown.
        if [[ ${names[i]} == postgres ]] && ((postmaster_signalled)); then continue; fi
        log "stopping ${names[i]} (pid ${pids[i]}, SIG${sigs[i]})"
        kill -s "${sigs[i]}" "${pids[i]}" 2>/dev/null || true
        if [[ ${names[i]} == postgres-postmaster ]]; then postmaster_signalled=1; fi
    done
    local deadline=$((SECONDS + STOP_TIMEOUT)) left
    while :; do
        left=0
        for i in "${!pids[@]}"; do alive "${pids[i]}" "${starts[i]}" && left=1; done
        ((left && SECONDS < deadline)) || break
        sleep 0.1
    done
    for i in "${!pids[@]}"; do
        if alive "${pids[i]}" "${starts[i]}"; then
            log "${names[i]} (pid ${pids[i]}) ignored SIG${sigs[i]} for ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -s KILL "${pids[i]}" 2>/dev/null || true
            for ((left = 0; left < 20; left++)); do
                alive "${pids[i]}" "${starts[i]}" || break
                sleep 0.1
            done
        fi
    done
    if [[ -f $dir/pgdir ]]; then
        local pgdir
        pgdir=$(<"$dir/pgdir")
        if [[ $pgdir == /tmp/fencelock-pg.* && -d $pgdir ]]; then rm -rf "$pgdir"; fi
    fi
    rm -rf "$dir"
}

main() {
    local cmd=${1:-}
    DIR=${2:-$PWD/.services}
    [[ $DIR == /* ]] || DIR=$PWD/$DIR
    read -ra SELECTED <<<"${FENCELOCK_SERVICES:-$ALL_SERVICES}"
    local s
    for s in "${SELECTED[@]}"; do
        [[ " $ALL_SERVICES " == *" $s "* ]] || die "unknown service '$s' in FENCELOCK_SERVICES (known: $ALL_SERVICES)"
    done
    case $cmd in
    start) do_start ;;
    stop) do_stop "$DIR" ;;
    *)
        echo "usage: $0 start|stop [DIR]   (FENCELOCK_SERVICES=\"$ALL_SERVICES\" selects a subset)" >&2
        exit 2
        ;;
    esac
}

main "$@"
