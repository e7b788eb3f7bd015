#!/usr/bin/env bash
# Throwaway servers for the tests, on 127.0.0.1 and free ports, started as plain background processes (no systemd).
#
#   scripts/services.sh start [DIR]   DIR defaults to $PWD/.services; then: source DIR/env
#   scripts/services.sh stop  [DIR]   stops only the processes DIR/pids records, then removes DIR
#   scripts/services.sh restart MEMBER [DIR]   starts a cluster member a test killed (e.g. etcd-cluster-2) again
#
# FENCELOCK_SERVICES="redis redlock redis-cluster etcd zk postgres mysql etcd-cluster zk-ensemble" starts a subset
# (default: all of them; mysql is MariaDB, Debian's mariadb-server).
# DIR/env exports FENCELOCK_SERVICES_DIR and, per service started:
#   FENCELOCK_TEST_REDIS, FENCELOCK_TEST_REDLOCK, FENCELOCK_TEST_REDLOCK_PORTS, FENCELOCK_TEST_REDIS_CLUSTER,
#   and, on servers that accept TLS only and require a password (ACL user fencelock, password fencelock-pw; the
#   default user's password is default-pw): FENCELOCK_TEST_REDIS_TLS (rediss://fencelock:…; client certificates
#   optional), FENCELOCK_TEST_REDIS_MTLS (the same, client certificate required), FENCELOCK_TEST_REDLOCK_TLS and
#   FENCELOCK_TEST_REDIS_CLUSTER_TLS (three instances or masters, ?tls=true; the cluster bus is TLS too). The URLs
#   name no ca=: add ?ca=$FENCELOCK_TEST_CA (or &ca=); FENCELOCK_TEST_REDIS_SECURE is _TLS with it,
#   ready to use.
#   FENCELOCK_TEST_ETCD, FENCELOCK_TEST_ZK, FENCELOCK_TEST_POSTGRES,
#   FENCELOCK_TEST_POSTGRES_TLS (user fencelock_tls, whom the same server admits over TLS only, with a password),
#   FENCELOCK_TEST_POSTGRES_CERT (user fencelock-client, admitted by the client certificate of that CN only),
#   FENCELOCK_TEST_ETCD_TLS (with etcd: a second etcd that speaks TLS only, wants a client certificate signed by
#   FENCELOCK_TEST_CA and has authentication on; the URL's user fencelock may read and write every key; add ca=,
#   cert= and key=; the client certificate's CN is no etcd user, so the password is what authorizes; root's
#   password is etcd-root-pw; auth tokens are JWTs),
#   FENCELOCK_TEST_ZK_TLS (the same ZooKeeper's secureClientPort, which requires a client certificate of the test
#   CA: a zk://…?tls=true URL with ca=, cert= and key= of the test PKI; digest auth needs no server set-up),
#   FENCELOCK_TEST_MYSQL (root, no password), FENCELOCK_TEST_MYSQL_AUTH (user fencelock, password fencelock-pw),
#   FENCELOCK_TEST_MYSQL_TLS (a user the server admits over TLS only), FENCELOCK_TEST_MYSQL_X509 (one it admits
#   only with a client certificate the test CA signed),
#   FENCELOCK_TEST_ETCD_CLUSTER and FENCELOCK_TEST_ZK_ENSEMBLE (three members each; with _PORTS, _PIDS, and the
#   _PIDFILE and _RESTART paths of member N: see "etcd cluster and ZooKeeper ensemble" below).
#   FENCELOCK_TEST_SENTINEL (redis+sentinel://s1,s2,s3/fencelock-master: three sentinels, a master and two
#   replicas) and FENCELOCK_TEST_SENTINEL_TLS (one sentinel, a master and a replica, TLS only; the URL has
#   ?tls=true&ca=), each with _SENTINELS (host:port list), _DATA_PORTS, _DATA_PIDFILE and _DATA_RESTART (data node
#   N; see "redis behind sentinel" below).
# Always, the test PKI (see make_certs): FENCELOCK_TEST_CA (the CA of every server's certificate, which is for
#   127.0.0.1), FENCELOCK_TEST_WRONG_CA (a CA that signed nothing), and the client certificates
#   FENCELOCK_TEST_CLIENT_CERT/_KEY (CN fencelock-client), FENCELOCK_TEST_OTHER_CERT/_KEY (CN fencelock-other), and
#   FENCELOCK_TEST_ROGUE_CERT/_KEY (CN fencelock-client, signed by the wrong CA).
set -euo pipefail

readonly ALL_SERVICES="redis redlock redis-cluster redis-sentinel etcd zk postgres mysql etcd-cluster zk-ensemble"
readonly READY_TIMEOUT=30           # seconds a server gets to answer its readiness probe
readonly STOP_TIMEOUT=10            # seconds between the polite signal and SIGKILL
readonly LAUNCH_ATTEMPTS=3          # a server that dies before it is ready (port taken in a race) gets new ports
readonly MARKER=.fencelock-services # only a directory holding this file is ever deleted
readonly ZK_CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar
# The Netty jars that zookeeper.jar's manifest class path leaves out but its Netty connection factory needs.
readonly ZK_NETTY=/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar
readonly MARIADBD=/usr/sbin/mariadbd

DIR=
PGTMP=
PG_BIN=
MYSQL_DIR=
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
    command -v ss >/dev/null || missing+=(iproute2)
    command -v openssl >/dev/null || missing+=(openssl) # the test PKI (make_certs), made on every start
    if wants redis || wants redlock || wants redis-cluster; then
        command -v redis-server >/dev/null || missing+=(redis-server)
        command -v redis-cli >/dev/null || missing+=(redis-tools)
    fi
    if wants etcd || wants etcd-cluster; then
        command -v etcd >/dev/null || missing+=(etcd-server)
        command -v etcdctl >/dev/null || missing+=(etcd-client)
    fi
    if wants zk || wants zk-ensemble; then
        [[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
        [[ -f /usr/share/java/netty-codec.jar ]] || missing+=(libnetty-java)
        command -v nc >/dev/null || missing+=(netcat-openbsd)
    fi
    if wants postgres; then compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql); fi
    # mariadbd is in /usr/sbin, which a user's PATH may lack; the package brings the client tools as well.
    if wants mysql; then
        [[ -x $MARIADBD ]] || missing+=(mariadb-server)
    fi
    ((${#missing[@]})) || return 0

    local sudo=()
    ((EUID == 0)) || sudo=(sudo)
    log "installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# --- redis -----------------------------------------------------------------------------------------------------

readonly REDIS_TLS_NODES=(redis-tls redis-mtls) # started with "redis"
readonly REDLOCK_TLS_NODES=(redlock-tls1 redlock-tls2 redlock-tls3)
readonly CLUSTER_TLS_NODES=(cluster-tls1 cluster-tls2 cluster-tls3)

# redis_security NAME PORT: sets REDIS_ARGS to how server NAME listens. A name with "tls" accepts TLS only, on
# PORT, with the test PKI (client certificates checked if given; required for redis-mtls), and requires a password:
# the ACL user fencelock's, or the default user's. The others listen in plaintext with no password, as ever.
redis_security() {
    local name=$1 port=$2 t=$DIR/tls clients=optional
    if [[ $name != *tls* ]]; then
        REDIS_ARGS=(--port "$port")
        return 0
    fi
    [[ $name == redis-mtls ]] && clients=yes
    REDIS_ARGS=(--port 0 --tls-port "$port" --tls-cert-file "$t/server.pem" --tls-key-file "$t/server.key"
        --tls-ca-cert-file "$t/ca.pem" --tls-auth-clients "$clients"
        --user default on '>default-pw' '~*' '&*' '+@all' --user fencelock on '>fencelock-pw' '~*' '&*' '+@all')
}

# redis_cli NAME ARGS...: redis-cli to server NAME, over TLS as the fencelock user where it needs that.
redis_cli() {
    local name=$1 t=$DIR/tls
    shift
    if [[ $name == *tls* ]]; then
        redis-cli --tls --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key" --user fencelock \
            --pass fencelock-pw --no-auth-warning -h 127.0.0.1 -p "${PORT[$name]}" "$@"
    else
        redis-cli -h 127.0.0.1 -p "${PORT[$name]}" "$@"
    fi
}

launch_redis() {
    local name=$1
    pick_port
    PORT[$name]=$PICKED
    mkdir -p "$DIR/$name"
    redis_security "$name" "${PORT[$name]}"
    spawn "$name" TERM redis-server "${REDIS_ARGS[@]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR/$name"
}

probe_redis() { [[ $(redis_cli "$1" ping 2>/dev/null) == PONG ]]; }

# --- redis behind sentinel -------------------------------------------------------------------------------------

# One master (data-1 at start), two replicas and three sentinels watching them as master "fencelock-master"
# (quorum 2, down after 1 s); and a TLS copy with one replica and one sentinel (quorum 1), every link TLS.
# Replicas log in to their master as the ACL user "replicator" (only what replication needs), so a test can cut
# replication without touching the servers' clients: `ACL SETUSER replicator off` and `CLIENT KILL TYPE replica`
# on the master leaves the replicas unable to reconnect. No persistence, like the other Redis servers: a killed
# master comes back empty, as a replica of whichever node the sentinels promoted (see `do_restart`).
readonly SENTINEL_MASTER=fencelock-master

sentinel_data() { # NAME: the data nodes of sentinel service NAME
    case $1 in
    redis-sentinel) echo "$1-data-1 $1-data-2 $1-data-3" ;;
    redis-sentinel-tls) echo "$1-data-1 $1-data-2" ;;
    esac
}
sentinel_watchers() { # NAME: its sentinels
    case $1 in
    redis-sentinel) echo "$1-1 $1-2 $1-3" ;;
    redis-sentinel-tls) echo "$1-1" ;;
    esac
}

# sentinel_tls_args NAME: sets REDIS_ARGS to how a member of a sentinel service listens, on PORT[NAME].
sentinel_tls_args() {
    local name=$1 t=$DIR/tls
    if [[ $name == redis-sentinel-tls* ]]; then
        REDIS_ARGS=(--port 0 --tls-port "${PORT[$name]}" --tls-cert-file "$t/server.pem" --tls-key-file
            "$t/server.key" --tls-ca-cert-file "$t/ca.pem" --tls-auth-clients optional --tls-replication yes
            --tls-client-cert-file "$t/client.pem" --tls-client-key-file "$t/client.key")
    else
        REDIS_ARGS=(--port "${PORT[$name]}")
    fi
}

# sentinel_node_cmd NAME [MASTER_PORT]: sets NODE_CMD to a data node's command line, a replica of MASTER_PORT if
# given.
sentinel_node_cmd() {
    local name=$1 master=${2:-}
    sentinel_tls_args "$name"
    NODE_CMD=(redis-server "${REDIS_ARGS[@]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR/$name"
        --user default on nopass '~*' '&*' '+@all' --user replicator on '>replicator-pw' +psync +replconf +ping
        --masteruser replicator --masterauth replicator-pw --replica-announce-ip 127.0.0.1)
    [[ -n $master ]] && NODE_CMD+=(--replicaof 127.0.0.1 "$master")
    return 0
}

launch_sentinel() {
    local name=$1 m data master conf t=$DIR/tls quorum=2
    [[ $name == redis-sentinel-tls ]] && quorum=1
    kill_members "$name"
    read -ra data <<<"$(sentinel_data "$name")"
    for m in $(members "$name"); do
        pick_port
        PORT[$m]=$PICKED
    done
    joined_ports "$name"
    master=${PORT[${data[0]}]}
    for m in "${data[@]}"; do
        rm -rf "${DIR:?}/$m"
        mkdir -p "$DIR/$m"
        if [[ $m == "${data[0]}" ]]; then sentinel_node_cmd "$m"; else sentinel_node_cmd "$m" "$master"; fi
        launch_member "$m" "${NODE_CMD[@]}"
    done
    for m in $(sentinel_watchers "$name"); do
        rm -rf "${DIR:?}/$m"
        mkdir -p "$DIR/$m"
        conf=$DIR/$m/sentinel.conf # the sentinel rewrites it with what it learns; a restart resumes from it
        {
            echo "bind 127.0.0.1"
            if [[ $name == redis-sentinel-tls ]]; then
                echo "port 0"
                echo "tls-port ${PORT[$m]}"
                echo "tls-cert-file $t/server.pem"
                echo "tls-key-file $t/server.key"
                echo "tls-ca-cert-file $t/ca.pem"
                echo "tls-auth-clients optional"
                echo "tls-replication yes"
                # The server certificate is for serverAuth only: links to the data nodes show the client one.
                echo "tls-client-cert-file $t/client.pem"
                echo "tls-client-key-file $t/client.key"
            else
                echo "port ${PORT[$m]}"
            fi
            echo "dir $DIR/$m"
            echo "sentinel monitor $SENTINEL_MASTER 127.0.0.1 $master $quorum"
            echo "sentinel down-after-milliseconds $SENTINEL_MASTER 1000"
            echo "sentinel failover-timeout $SENTINEL_MASTER 3000"
            echo "sentinel parallel-syncs $SENTINEL_MASTER 2"
        } >"$conf"
        launch_member "$m" redis-server "$conf" --sentinel
    done
}

# sentinel_cli MEMBER ARGS...: redis-cli to one member of a sentinel service.
sentinel_cli() {
    local name=$1 t=$DIR/tls
    shift
    if [[ $name == redis-sentinel-tls* ]]; then
        redis-cli --tls --cacert "$t/ca.pem" -h 127.0.0.1 -p "${PORT[$name]}" "$@"
    else
        redis-cli -h 127.0.0.1 -p "${PORT[$name]}" "$@"
    fi
}

probe_sentinel_member() { [[ $(sentinel_cli "$1" ping 2>/dev/null) == PONG ]]; }

probe_sentinel() {
    local m
    for m in $(members "$1"); do probe_sentinel_member "$m" || return 1; done
}

# finish_sentinel NAME: waits until every sentinel knows the master, all its replicas and the other sentinels, and
# every replica has synced.
finish_sentinel() {
    local name=$1 m w data watchers info deadline=$((SECONDS + READY_TIMEOUT))
    read -ra data <<<"$(sentinel_data "$name")"
    read -ra watchers <<<"$(sentinel_watchers "$name")"
    for w in "${watchers[@]}"; do
        until info=$(sentinel_cli "$w" sentinel master "$SENTINEL_MASTER" 2>/dev/null | paste -sd' ') &&
            [[ $info == *"num-slaves $((${#data[@]} - 1)) "* && $info == *"num-other-sentinels $((${#watchers[@]} - 1)) "* ]]; do
            if ((SECONDS >= deadline)); then
                log_tail "$w"
                die "$w did not see every replica and sentinel of $name within ${READY_TIMEOUT}s (${info:-no answer})"
            fi
            sleep 0.2
        done
    done
    for m in "${data[@]:1}"; do
        until [[ $(sentinel_cli "$m" info replication 2>/dev/null) == *master_link_status:up* ]]; do
            ((SECONDS < deadline)) || die "$m did not sync with its master within ${READY_TIMEOUT}s"
            sleep 0.2
        done
    done
}

# sentinel_restart_cmd MEMBER: a data node comes back as a replica of the master the sentinels name now, so it
# never serves as a second, empty master while they catch up.
sentinel_restart_cmd() {
    local name=$1 service w addr
    service=${name%-data-*}
    for w in $(sentinel_watchers "$service"); do
        eval "$(grep '^PORT' "$DIR/$w.member")" # restart knows only its own member's port
        addr=$(sentinel_cli "$w" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | sed -n 2p)
        [[ -n $addr ]] && break
    done
    if [[ -n $addr && $addr != "${PORT[$name]}" ]]; then
        sentinel_node_cmd "$name" "$addr"
    else
        sentinel_node_cmd "$name"
    fi
    MEMBER_CMD=("${NODE_CMD[@]}")
}

# --- redis cluster ---------------------------------------------------------------------------------------------

readonly CLUSTER_NODES=(cluster1 cluster2 cluster3) # three masters, no replicas: every slot has one owner

launch_cluster() {
    local name=$1 t=$DIR/tls bus=()
    pick_port
    PORT[$name]=$PICKED
    mkdir -p "$DIR/$name"
    rm -f "$DIR/$name/nodes.conf" # a relaunch on new ports must not find the node's old address
    redis_security "$name" "${PORT[$name]}"
    # The bus over TLS: a node dials its peers with the client certificate (the server's is for serverAuth only).
    [[ $name == *tls* ]] && bus=(--tls-cluster yes --tls-client-cert-file "$t/client.pem"
        --tls-client-key-file "$t/client.key")
    spawn "$name" TERM redis-server "${REDIS_ARGS[@]}" "${bus[@]}" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$DIR/$name" --cluster-enabled yes --cluster-config-file "$DIR/$name/nodes.conf" \
        --cluster-node-timeout 5000
}

probe_cluster() { probe_redis "$1"; }

cluster_ok() { [[ $(redis_cli "$1" cluster info 2>/dev/null) == *cluster_state:ok* ]]; }

# create_cluster NODES...: assigns the slots across the masters.
create_cluster() {
    local name addrs=()
    for name in "$@"; do addrs+=("127.0.0.1:${PORT[$name]}"); done
    if ! redis_cli "$1" --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >>"$DIR/cluster.log" 2>&1
    then
        log_tail cluster
        die "redis-cli --cluster create failed (see $DIR/cluster.log)"
    fi
}

# await_cluster NODES...: waits until every node sees the whole cluster as ok.
await_cluster() {
    local name deadline=$((SECONDS + READY_TIMEOUT))
    for name in "$@"; do
        until cluster_ok "$name"; do
            if ((SECONDS >= deadline)); then
                log_tail "$name"
                die "$name did not report cluster_state:ok within ${READY_TIMEOUT}s"
            fi
            sleep 0.2
        done
    done
}

# The two clusters are made at once: each creation waits for its nodes to join, and a TLS node that saw itself in
# a minority while its peers joined waits out a rejoin delay (the node timeout) before it reports ok.
finish_cluster() {
    local tls
    create_cluster "${CLUSTER_TLS_NODES[@]}" &
    tls=$!
    create_cluster "${CLUSTER_NODES[@]}"
    wait "$tls" || die "the TLS cluster could not be created"
    await_cluster "${CLUSTER_NODES[@]}"
    await_cluster "${CLUSTER_TLS_NODES[@]}"
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

# The TLS-only etcd: https for clients (the peer port of this lone member carries nothing), client certificates
# required (--client-cert-auth); finish_etcd_tls turns authentication on.
launch_etcd_tls() {
    local name=$1 t=$DIR/tls client peer
    pick_port
    PORT[$name]=$PICKED
    pick_port
    client=https://127.0.0.1:${PORT[$name]}
    peer=http://127.0.0.1:$PICKED
    rm -rf "${DIR:?}/$name"
    # JWT auth tokens (signed with the server key, which etcd wants as SEC1): they carry the auth store's revision,
    # so a change to users or roles outdates them, unlike simple tokens; the tests check the backend copes.
    if ! { openssl ec -in "$t/server.key" -out "$DIR/$name-jwt.key" &&
        openssl ec -in "$t/server.key" -pubout -out "$DIR/$name-jwt.pub"; } 2>>"$DIR/tls.log"; then
        die "could not make the JWT keys of the TLS etcd (see $DIR/tls.log)"
    fi
    spawn "$name" TERM etcd --name fencelock-tls --data-dir "$DIR/$name" --logger zap \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "fencelock-tls=$peer" --initial-cluster-state new \
        --cert-file "$t/server.pem" --key-file "$t/server.key" --trusted-ca-file "$t/ca.pem" --client-cert-auth \
        --auth-token "jwt,pub-key=$DIR/$name-jwt.pub,priv-key=$DIR/$name-jwt.key,sign-method=ES256,ttl=10m"
}

# etcdctl_tls ARGS...: etcdctl against the TLS etcd with the test client certificate (and ARGS' --user, if any).
etcdctl_tls() {
    local t=$DIR/tls
    ETCDCTL_API=3 etcdctl --endpoints "https://127.0.0.1:${PORT[etcd-tls]}" --cacert "$t/ca.pem" \
        --cert "$t/client.pem" --key "$t/client.key" --dial-timeout 1s --command-timeout 3s "$@"
}

probe_etcd_tls() { etcdctl_tls endpoint health >/dev/null 2>&1; }

# Users root and fencelock (readwrite on every key), then auth on.
finish_etcd_tls() {
    {
        etcdctl_tls user add root --new-user-password=etcd-root-pw &&
            etcdctl_tls user add fencelock --new-user-password=etcd-tls-pw &&
            etcdctl_tls role add fencelock &&
            etcdctl_tls role grant-permission fencelock readwrite --prefix '' &&
            etcdctl_tls user grant-role fencelock fencelock &&
            etcdctl_tls auth enable
    } >>"$DIR/etcd-tls.log" 2>&1 || die "could not set up the users of the TLS etcd (see $DIR/etcd-tls.log)"
}

# --- zookeeper -------------------------------------------------------------------------------------------------

launch_zk() {
    local name=$1 dir=$DIR/zk t=$DIR/tls
    pick_port
    PORT[$name]=$PICKED
    pick_port
    PORT[$name-tls]=$PICKED
    mkdir -p "$dir/data"
    # ZooKeeper's PEM key store is one file: the key, then the certificate.
    cat "$t/server.key" "$t/server.pem" >"$dir/server-keystore.pem"
    # admin.enableServer=false: otherwise Jetty binds 0.0.0.0:8080. maxClientCnxns=0: tests open many sessions.
    # The secure port needs the Netty connection factory (Debian's libnetty-java, a dependency of zookeeper), which
    # then serves the plaintext port too; ssl.clientAuth=need: a client certificate of the test CA.
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/data
clientPort=${PORT[$name]}
clientPortAddress=127.0.0.1
secureClientPort=${PORT[$name-tls]}
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$dir/server-keystore.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$t/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=need
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,conf
EOF
    spawn "$name" TERM java -Xmx256m -XX:+UseSerialGC -XX:-UsePerfData -cp "$ZK_CLASSPATH:$ZK_NETTY" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
}

probe_zk() {
    [[ $(echo ruok | nc -w 2 127.0.0.1 "${PORT[$1]}" 2>/dev/null) == imok ]] &&
        echo srvr | nc -w 2 127.0.0.1 "${PORT[$1]}" 2>/dev/null | grep -q '^Mode: ' &&
        { [[ -z ${PORT[$1-tls]:-} ]] || [[ -n $(ss -Htln "sport = :${PORT[$1-tls]}") ]]; }
}

# --- etcd cluster and ZooKeeper ensemble -----------------------------------------------------------------------
#
# Three members each, for failover tests. A test kills member N (its current pid is in DIR/<name>-N.pid) and starts
# it again with DIR/restart-<name>-N.sh, i.e. `services.sh restart <name>-N DIR`: the member's saved command line, its
# new pid recorded in DIR/pids (so stop ends it too) and DIR/<name>-N.pid, then a wait until it has rejoined.

readonly ENSEMBLE_SIZE=3
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
readonly SELF

# members NAME: the members of a cluster service; any other server is its own only member.
members() {
    local i
    case $1 in
    etcd-cluster | zk-ensemble) for ((i = 1; i <= ENSEMBLE_SIZE; i++)); do printf '%s-%d ' "$1" "$i"; done ;;
    redis-sentinel | redis-sentinel-tls) echo "$(sentinel_data "$1") $(sentinel_watchers "$1")" ;;
    *) echo "$1" ;;
    esac
}

# running NAME: the server, or every member of a cluster, is up.
running() {
    local m
    for m in $(members "$1"); do alive "${PID[$m]}" || return 1; done
}

# launch_member NAME CMD...: spawn a member and save what `restart` needs: its command line, client port and pid.
launch_member() {
    local name=$1
    shift
    spawn "$name" TERM "$@"
    echo "${PID[$name]}" >"$DIR/$name.pid"
    {
        printf 'PORT[%s]=%s\n' "$name" "${PORT[$name]}"
        printf 'MEMBER_CMD=(%s)\n' "$(printf '%q ' "$@")"
    } >"$DIR/$name.member"
    {
        echo '#!/usr/bin/env bash'
        echo "# Starts $name again after a test killed it, and waits until it has rejoined."
        printf 'exec %q restart %q %q\n' "$SELF" "$name" "$DIR"
    } >"$DIR/restart-$name.sh"
    chmod +x "$DIR/restart-$name.sh"
}

# kill_members NAME: a relaunch on new ports first ends the members the last attempt started (not ready: SIGKILL).
kill_members() {
    local m pid i
    for m in $(members "$1"); do
        pid=${PID[$m]:-}
        if [[ -z $pid ]] || ! alive "$pid"; then continue; fi
        kill -s KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            alive "$pid" || break
            sleep 0.1
        done
    done
}

# joined_ports NAME: sets PORT[NAME] to the client ports of its members, for messages.
joined_ports() {
    local m ports=()
    for m in $(members "$1"); do ports+=("${PORT[$m]}"); done
    local IFS=,
    PORT[$1]="${ports[*]}"
}

launch_etcd_cluster() {
    local name=$1 m cluster='' token client
    local -A peer=()
    kill_members "$name"
    for m in $(members "$name"); do
        pick_port
        PORT[$m]=$PICKED
        pick_port
        peer[$m]=http://127.0.0.1:$PICKED
        cluster+=${cluster:+,}$m=${peer[$m]}
    done
    joined_ports "$name"
    token=$name-$RANDOM$RANDOM # a member of another run's cluster can never join this one
    for m in $(members "$name"); do
        rm -rf "${DIR:?}/$m" # a relaunch must not find members registered with the old peer URLs
        # A restart finds its data dir and ignores the --initial-* flags: it rejoins as the same member.
        client=http://127.0.0.1:${PORT[$m]}
        launch_member "$m" etcd --name "$m" --data-dir "$DIR/$m" --logger zap \
            --listen-client-urls "$client" --advertise-client-urls "$client" \
            --listen-peer-urls "${peer[$m]}" --initial-advertise-peer-urls "${peer[$m]}" \
            --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "$token"
    done
}

# Every member serves a quorum read.
probe_etcd_cluster() {
    local m
    for m in $(members "$1"); do probe_etcd "$m" || return 1; done
}

launch_zk_ensemble() {
    local name=$1 m i=0 quorum servers='' dir
    kill_members "$name"
    for m in $(members "$name"); do
        i=$((i + 1))
        pick_port
        PORT[$m]=$PICKED
        pick_port
        quorum=$PICKED
        pick_port
        servers+="server.$i=127.0.0.1:$quorum:$PICKED"$'\n'
    done
    joined_ports "$name"
    i=0
    for m in $(members "$name"); do
        i=$((i + 1))
        dir=$DIR/$m
        rm -rf "$dir"
        mkdir -p "$dir/data"
        echo "$i" >"$dir/data/myid"
        # As for zk, plus the quorum: initLimit/syncLimit in ticks; server.N=host:quorumPort:electionPort.
        cat >"$dir/zoo.cfg" <<EOF2
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=${PORT[$m]}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,conf
$servers
EOF2
        launch_member "$m" java -Xmx256m -XX:+UseSerialGC -XX:-UsePerfData -cp "$ZK_CLASSPATH" \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
    done
}

# A member serves once it is in the quorum: srvr says leader or follower (else "not currently serving requests").
probe_zk_member() { echo srvr | nc -w 2 127.0.0.1 "${PORT[$1]}" 2>/dev/null | grep -Eq '^Mode: (leader|follower)$'; }

probe_zk_ensemble() {
    local m
    for m in $(members "$1"); do probe_zk_member "$m" || return 1; done
}

# env_ensemble NAME VAR SCHEME: the env lines of a cluster service.
env_ensemble() {
    local name=$1 var=$2 scheme=$3 m hosts=() ports=() pids=()
    for m in $(members "$name"); do
        hosts+=("127.0.0.1:${PORT[$m]}")
        ports+=("${PORT[$m]}")
        pids+=("${PID[$m]}")
    done
    local IFS=,
    echo "export $var=\"$scheme://${hosts[*]}\""
    IFS=' '
    echo "export ${var}_PORTS=\"${ports[*]}\""
    echo "export ${var}_PIDS=\"${pids[*]}\""
    # N stands for the member number, 1 to 3.
    printf 'export %s_PIDFILE=%q\n' "$var" "$DIR/$name-N.pid"
    printf 'export %s_RESTART=%q\n' "$var" "$DIR/restart-$name-N.sh"
}

# env_sentinel NAME VAR QUERY: the env lines of a sentinel service: the URL, and the data nodes' ports, pid files
# and restart scripts (N: 1 to the number of data nodes; node 1 was the first master).
env_sentinel() {
    local name=$1 var=$2 query=$3 m hosts=() ports=()
    for m in $(sentinel_watchers "$name"); do hosts+=("127.0.0.1:${PORT[$m]}"); done
    for m in $(sentinel_data "$name"); do ports+=("${PORT[$m]}"); done
    local IFS=,
    echo "export $var=\"redis+sentinel://${hosts[*]}/$SENTINEL_MASTER$query\""
    IFS=' '
    echo "export ${var}_SENTINELS=\"${hosts[*]}\""
    echo "export ${var}_DATA_PORTS=\"${ports[*]}\""
    printf 'export %s_PIDFILE=%q\n' "${var}_DATA" "$DIR/$name-data-N.pid"
    printf 'export %s_RESTART=%q\n' "${var}_DATA" "$DIR/restart-$name-data-N.sh"
}

# restart MEMBER: starts a cluster member again (after a test killed it) and waits until it has rejoined; a member
# still running is only waited for.
do_restart() {
    local name=$1 last probe deadline MEMBER_CMD=()
    [[ -e $DIR/$MARKER && -f $DIR/$name.member ]] || die "$name is no cluster member started in $DIR"
    # shellcheck source=/dev/null # written by launch_member
    source "$DIR/$name.member"
    case $name in
    etcd-cluster-*) probe=probe_etcd ;;
    redis-sentinel*) probe=probe_sentinel_member ;;
    *) probe=probe_zk_member ;;
    esac
    [[ $name == redis-sentinel*-data-* ]] && sentinel_restart_cmd "$name"
    last=$(awk -v n="$name" '$1 == n { p = $2; s = $3 } END { print p, s }' "$DIR/pids")
    # shellcheck disable=SC2086 # pid and start time
    if alive $last; then
        PID[$name]=${last%% *}
    else
        spawn "$name" TERM "${MEMBER_CMD[@]}"
        echo "${PID[$name]}" >"$DIR/$name.pid"
    fi
    deadline=$((SECONDS + READY_TIMEOUT))
    until "$probe" "$name" && alive "${PID[$name]}"; do
        if ! alive "${PID[$name]}" || ((SECONDS >= deadline)); then
            log_tail "$name"
            die "$name (pid ${PID[$name]}) did not rejoin on port ${PORT[$name]} within ${READY_TIMEOUT}s"
        fi
        sleep 0.2
    done
    log "$name ready on 127.0.0.1:${PORT[$name]} (pid ${PID[$name]})"
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
    # TLS: the server refuses a key that others may read, so it gets a private copy of its own.
    cp "$DIR/tls/server.pem" "$DIR/tls/server.key" "$DIR/tls/ca.pem" "$PGTMP/"
    chmod 600 "$PGTMP/server.key"
    if ((EUID == 0)); then chown postgres: "$PGTMP/server.pem" "$PGTMP/server.key" "$PGTMP/ca.pem"; fi
    # fencelock_tls: a password, over TLS only; fencelock-client: its client certificate, over TLS only (first match
    # wins); everyone else as initdb left it (trust).
    local hba=$PGTMP/data/pg_hba.conf
    {
        printf '%s\n' 'hostssl all fencelock_tls 127.0.0.1/32 scram-sha-256' \
            'hostnossl all fencelock_tls 127.0.0.1/32 reject' 'hostssl all fencelock-client 127.0.0.1/32 cert' \
            'host all fencelock-client 127.0.0.1/32 reject'
        cat "$hba"
    } >"$hba.new" && mv "$hba.new" "$hba"
    if ((EUID == 0)); then chown postgres: "$hba"; fi
}

launch_postgres() {
    local name=$1
    [[ -n $PGTMP ]] || init_postgres
    pick_port
    PORT[$name]=$PICKED
    # A throwaway cluster: durability settings off for speed.
    pg_cmd "$PG_BIN/postgres" -D "$PGTMP/data" -h 127.0.0.1 -p "${PORT[$name]}" -k "$PGTMP" \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
        -c ssl=on -c ssl_cert_file="$PGTMP/server.pem" -c ssl_key_file="$PGTMP/server.key" \
        -c ssl_ca_file="$PGTMP/ca.pem"
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
        -c 'CREATE DATABASE fencelock_test' -c "CREATE USER fencelock_tls PASSWORD 'pg-tls-pw'" \
        -c 'CREATE DATABASE fencelock_tls OWNER fencelock_tls' -c 'CREATE USER "fencelock-client"' \
        -c 'CREATE DATABASE fencelock_cert OWNER "fencelock-client"' >>"$DIR/postgres.log" 2>&1 ||
        die "could not create database fencelock_test (see $DIR/postgres.log)"
}

# --- mysql (MariaDB) -------------------------------------------------------------------------------------------

# --no-defaults everywhere: no /etc/mysql/my.cnf, no ~/.my.cnf. mariadbd refuses to run as root unless told so.
mysql_user_args() { if ((EUID == 0)); then echo --user=root; fi; }

# A throwaway server: small buffer pool and redo log (fast to create and start), the redo log written at every
# commit but flushed once a second (a killed server keeps its data; only an OS crash could lose the last second).
# mariadb-install-db passes them on to its bootstrap server.
readonly MYSQL_OPTS=(--skip-name-resolve --innodb-buffer-pool-size=32M --innodb-log-file-size=8M
    --innodb-flush-log-at-trx-commit=2 --max-connections=300)

init_mysql() {
    local sock
    MYSQL_DIR=$DIR/mysql
    mkdir -p "$MYSQL_DIR"
    # A unix socket path has at most 107 bytes; nothing uses the socket (clients use TCP), but the server needs one.
    sock=$MYSQL_DIR/mysqld.sock
    if ((${#sock} > 100)); then
        sock=$(mktemp -d /tmp/fencelock-mysql.XXXXXX)
        echo "$sock" >"$DIR/mysqlsockdir"
        sock=$sock/mysqld.sock
    fi
    echo "$sock" >"$MYSQL_DIR/socket"
    # shellcheck disable=SC2046 # mysql_user_args is zero or one word
    if ! mariadb-install-db --no-defaults --datadir="$MYSQL_DIR/data" --auth-root-authentication-method=normal \
        --skip-test-db $(mysql_user_args) "${MYSQL_OPTS[@]}" >>"$DIR/mysql.log" 2>&1; then
        log_tail mysql
        die "mariadb-install-db failed"
    fi
}

# --- the test PKI ----------------------------------------------------------------------------------------------

# make_certs: in $DIR/tls, a CA; a server certificate it signed for IP 127.0.0.1 only (not localhost, so a test can
# connect by a name the certificate does not hold); two client certificates it signed (CN fencelock-client and
# fencelock-other: two identities for mutual TLS); a second CA that signed nothing (the "wrong CA" of the tests) and
# a client certificate that wrong CA signed (an identity the servers must refuse). EC keys: quick to make. Every TLS
# service uses these files; write_env exports their paths.
make_certs() {
    local d=$DIR/tls key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes) who
    mkdir -p "$d"
    printf '%s\n' subjectAltName=IP:127.0.0.1 basicConstraints=CA:FALSE extendedKeyUsage=serverAuth >"$d/server.ext"
    printf '%s\n' basicConstraints=CA:FALSE extendedKeyUsage=clientAuth >"$d/client.ext"
    # sign NAME CN CA EXT: NAME.key and NAME.pem, a certificate for CN that CA signed.
    sign() {
        openssl req "${key[@]}" -subj "/CN=$2" -keyout "$d/$1.key" -out "$d/$1.csr" &&
            openssl x509 -req -in "$d/$1.csr" -CA "$d/$3.pem" -CAkey "$d/$3.key" -CAcreateserial -days 3 \
                -extfile "$d/$4.ext" -out "$d/$1.pem"
    }
    {
        for who in ca wrong-ca; do
            openssl req -x509 "${key[@]}" -days 3 -subj "/CN=fencelock-test-$who" -keyout "$d/$who.key" \
                -out "$d/$who.pem" -addext basicConstraints=critical,CA:TRUE \
                -addext keyUsage=critical,keyCertSign,cRLSign || exit 1
        done
        sign server 127.0.0.1 ca server && sign client fencelock-client ca client &&
            sign other fencelock-other ca client && sign rogue fencelock-client wrong-ca client
    } >>"$DIR/tls.log" 2>&1 || die "could not make the test certificates (see $DIR/tls.log)"
    # Servers that run as another user (PostgreSQL) need to read the server key; the directory is private to $DIR.
    chmod 644 "$d"/*.pem "$d"/*.key
}

launch_mysql() {
    local name=$1
    [[ -n $MYSQL_DIR ]] || init_mysql
    pick_port
    PORT[$name]=$PICKED
    # shellcheck disable=SC2046 # mysql_user_args is zero or one word
    spawn "$name" TERM "$MARIADBD" --no-defaults --datadir="$MYSQL_DIR/data" --socket="$(<"$MYSQL_DIR/socket")" \
        --port="${PORT[$name]}" --bind-address=127.0.0.1 $(mysql_user_args) --pid-file="$MYSQL_DIR/mariadbd.pid" \
        "${MYSQL_OPTS[@]}" --ssl-ca="$DIR/tls/ca.pem" --ssl-cert="$DIR/tls/server.pem" \
        --ssl-key="$DIR/tls/server.key"
}

# mysql_root ARGS...: the mariadb client as root over TCP (a server that is not up fails within 2 s).
mysql_root() { mariadb --no-defaults --connect-timeout=2 -h127.0.0.1 -P"${PORT[mysql]}" -uroot "$@"; }

# ping exits 0 once the server accepts connections (even if it refused the login).
probe_mysql() {
    mariadb-admin --no-defaults --connect-timeout=2 -h127.0.0.1 -P"${PORT[$1]}" -uroot ping >/dev/null 2>&1
}

# The test database, and a user with a password for the authentication tests (root has none).
finish_mysql() {
    mysql_root -e "CREATE DATABASE fencelock_test;
        CREATE USER 'fencelock'@'%' IDENTIFIED BY 'fencelock-pw';
        GRANT ALL PRIVILEGES ON fencelock_test.* TO 'fencelock'@'%';
        CREATE USER 'fencelock_tls'@'%' IDENTIFIED BY 'tls-pw' REQUIRE SSL;
        GRANT ALL PRIVILEGES ON fencelock_test.* TO 'fencelock_tls'@'%';
        CREATE USER 'fencelock_x509'@'%' IDENTIFIED BY 'x509-pw' REQUIRE X509;
        GRANT ALL PRIVILEGES ON fencelock_test.* TO 'fencelock_x509'@'%';" >>"$DIR/mysql.log" 2>&1 ||
        die "could not create database fencelock_test and its users (see $DIR/mysql.log)"
}

# --- start / stop ----------------------------------------------------------------------------------------------

kind_of() {
    case $1 in
    redis-sentinel*) echo sentinel ;;
    redlock* | redis-*) echo redis ;;
    cluster*) echo cluster ;;
    etcd-cluster) echo etcd_cluster ;;
    etcd-tls) echo etcd_tls ;;
    zk-ensemble) echo zk_ensemble ;;
    *) echo "$1" ;;
    esac
}

# await NAME: wait for the probe; relaunch on new ports if the server died first; fail loudly at the deadline.
await() {
    local name=$1 kind attempt deadline m
    kind=$(kind_of "$name")
    for ((attempt = 1; attempt <= LAUNCH_ATTEMPTS; attempt++)); do
        deadline=$((SECONDS + READY_TIMEOUT))
        while running "$name"; do
            # Probe, then check it is still ours: a server that lost a port race exits, a stranger would answer.
            if "probe_$kind" "$name" && running "$name"; then return 0; fi
            if ((SECONDS >= deadline)); then
                for m in $(members "$name"); do log_tail "$m"; done
                die "$name did not become ready on port ${PORT[$name]} within ${READY_TIMEOUT}s"
            fi
            sleep 0.2
        done
        for m in $(members "$name"); do log_tail "$m"; done
        log "$name exited before it was ready (attempt $attempt/$LAUNCH_ATTEMPTS)"
        ((attempt < LAUNCH_ATTEMPTS)) && "launch_$kind" "$name"
    done
    die "$name could not be started"
}

# hosts NAMES...: 127.0.0.1:PORT of each server, comma-separated.
hosts() {
    local name list=()
    for name in "$@"; do list+=("127.0.0.1:${PORT[$name]}"); done
    (IFS=,; echo "${list[*]}")
}

write_env() {
    local tmp=$DIR/env.tmp
    {
        printf 'export FENCELOCK_SERVICES_DIR=%q\n' "$DIR"
        local t=$DIR/tls
        echo "export FENCELOCK_TEST_CA=\"$t/ca.pem\" FENCELOCK_TEST_WRONG_CA=\"$t/wrong-ca.pem\""
        echo "export FENCELOCK_TEST_CLIENT_CERT=\"$t/client.pem\" FENCELOCK_TEST_CLIENT_KEY=\"$t/client.key\""
        echo "export FENCELOCK_TEST_OTHER_CERT=\"$t/other.pem\" FENCELOCK_TEST_OTHER_KEY=\"$t/other.key\""
        echo "export FENCELOCK_TEST_ROGUE_CERT=\"$t/rogue.pem\" FENCELOCK_TEST_ROGUE_KEY=\"$t/rogue.key\""
        if wants redis; then
            echo "export FENCELOCK_TEST_REDIS=\"redis://127.0.0.1:${PORT[redis]}\""
            echo "export FENCELOCK_TEST_REDIS_TLS=\"rediss://fencelock:fencelock-pw@127.0.0.1:${PORT[redis-tls]}\""
            # Ready to use (TLS, an ACL user and the CA): the conformance runners' TLS row in every language.
            echo "export FENCELOCK_TEST_REDIS_SECURE=\"rediss://fencelock:fencelock-pw@127.0.0.1:${PORT[redis-tls]}?ca=$DIR/tls/ca.pem\""
            echo "export FENCELOCK_TEST_REDIS_MTLS=\"rediss://fencelock:fencelock-pw@127.0.0.1:${PORT[redis-mtls]}\""
        fi
        if wants redlock; then
            local p1=${PORT[redlock1]} p2=${PORT[redlock2]} p3=${PORT[redlock3]}
            echo "export FENCELOCK_TEST_REDLOCK=\"redlock://127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$p3\""
            echo "export FENCELOCK_TEST_REDLOCK_PORTS=\"$p1 $p2 $p3\""
            local tls_hosts
            tls_hosts=$(hosts "${REDLOCK_TLS_NODES[@]}")
            echo "export FENCELOCK_TEST_REDLOCK_TLS=\"redlock://fencelock:fencelock-pw@$tls_hosts?tls=true\""
        fi
        if wants redis-cluster; then
            local c1=${PORT[cluster1]} c2=${PORT[cluster2]} c3=${PORT[cluster3]}
            echo "export FENCELOCK_TEST_REDIS_CLUSTER=\"redis+cluster://127.0.0.1:$c1,127.0.0.1:$c2,127.0.0.1:$c3\""
            local tls_nodes
            tls_nodes=$(hosts "${CLUSTER_TLS_NODES[@]}")
            echo "export FENCELOCK_TEST_REDIS_CLUSTER_TLS=\"redis+cluster://fencelock:fencelock-pw@$tls_nodes?tls=true\""
        fi
        if wants etcd; then
            echo "export FENCELOCK_TEST_ETCD=\"etcd://127.0.0.1:${PORT[etcd]}\""
            echo "export FENCELOCK_TEST_ETCD_TLS=\"etcd+https://fencelock:etcd-tls-pw@127.0.0.1:${PORT[etcd-tls]}\""
        fi
        if wants zk; then
            echo "export FENCELOCK_TEST_ZK=\"zk://127.0.0.1:${PORT[zk]}\""
            echo "export FENCELOCK_TEST_ZK_TLS=\"zk://127.0.0.1:${PORT[zk-tls]}?tls=true&ca=$t/ca.pem&cert=$t/client.pem&key=$t/client.key\""
        fi
        if wants etcd-cluster; then env_ensemble etcd-cluster FENCELOCK_TEST_ETCD_CLUSTER etcd; fi
        if wants zk-ensemble; then env_ensemble zk-ensemble FENCELOCK_TEST_ZK_ENSEMBLE zk; fi
        if wants redis-sentinel; then
            env_sentinel redis-sentinel FENCELOCK_TEST_SENTINEL ''
            env_sentinel redis-sentinel-tls FENCELOCK_TEST_SENTINEL_TLS "?tls=true&ca=$t/ca.pem"
        fi
        if wants postgres; then
            local pg=127.0.0.1:${PORT[postgres]}
            echo "export FENCELOCK_TEST_POSTGRES=\"postgres://postgres@$pg/fencelock_test\""
            echo "export FENCELOCK_TEST_POSTGRES_TLS=\"postgres://fencelock_tls:pg-tls-pw@$pg/fencelock_tls\""
            echo "export FENCELOCK_TEST_POSTGRES_CERT=\"postgres://fencelock-client@$pg/fencelock_cert\""
        fi
        if wants mysql; then
            local my=127.0.0.1:${PORT[mysql]}/fencelock_test
            echo "export FENCELOCK_TEST_MYSQL=\"mysql://root@$my\""
            echo "export FENCELOCK_TEST_MYSQL_AUTH=\"mysql://fencelock:fencelock-pw@$my\""
            echo "export FENCELOCK_TEST_MYSQL_TLS=\"mysql://fencelock_tls:tls-pw@$my\""
            echo "export FENCELOCK_TEST_MYSQL_X509=\"mysql://fencelock_x509:x509-pw@$my\""
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
    make_certs

    wants redis && instances+=(redis "${REDIS_TLS_NODES[@]}")
    wants redlock && instances+=(redlock1 redlock2 redlock3 "${REDLOCK_TLS_NODES[@]}")
    wants redis-cluster && instances+=("${CLUSTER_NODES[@]}" "${CLUSTER_TLS_NODES[@]}")
    wants etcd && instances+=(etcd etcd-tls)
    wants zk && instances+=(zk)
    wants etcd-cluster && instances+=(etcd-cluster)
    wants zk-ensemble && instances+=(zk-ensemble)
    wants redis-sentinel && instances+=(redis-sentinel redis-sentinel-tls)
    wants postgres && instances+=(postgres) # late: its initdb runs while the JVMs boot
    wants mysql && instances+=(mysql)       # last: mariadb-install-db runs while the others start
    for name in "${instances[@]}"; do "launch_$(kind_of "$name")" "$name"; done
    for name in "${instances[@]}"; do await "$name"; done
    if wants redis-cluster; then finish_cluster; fi
    if wants redis-sentinel; then
        finish_sentinel redis-sentinel
        finish_sentinel redis-sentinel-tls
    fi
    if wants etcd; then finish_etcd_tls; fi
    if wants postgres; then finish_postgres; fi
    if wants mysql; then finish_mysql; fi
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
    if [[ -f $dir/mysqlsockdir ]]; then
        local sockdir
        sockdir=$(<"$dir/mysqlsockdir")
        if [[ $sockdir == /tmp/fencelock-mysql.* && -d $sockdir ]]; then rm -rf "$sockdir"; fi
    fi
    rm -rf "$dir"
}

main() {
    local cmd=${1:-} member=
    if [[ $cmd == restart ]]; then
        member=${2:-}
        shift
    fi
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
    restart) do_restart "$member" ;;
    *)
        echo "usage: $0 start|stop [DIR] | restart MEMBER [DIR]" >&2
        echo "       (FENCELOCK_SERVICES=\"$ALL_SERVICES\" selects a subset)" >&2
        exit 2
        ;;
    esac
}

main "$@"
