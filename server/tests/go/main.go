// Command goclient drives fencelockd with etcd's own Go clients: clientv3 for the lease (grant + keep-alive) and
// the generated v3lockpb.LockClient for Lock/Unlock. Nothing here knows fencelockd is not etcd.
//
//	goclient -endpoint 127.0.0.1:2379 -name N -ttl 5 -mode hold -hold 1s      lock, hold, unlock
//	goclient ... -mode hold -wait 2s                                           give up (exit 3, "TIMEOUT") after 2 s
//	goclient ... -mode worker -iterations 100 -hold 10ms                       lock/unlock in a loop
//	goclient -mode faults-worker -endpoint A -referee A -client c6 -ttl-ms 2000 -seed N   tests/faults's worker protocol
//	goclient ... -mode foreign -victim KEY     every use of the lease of another client's lock key must be refused
//	goclient -mode election-failover -endpoint A[,B…] -name N -ttl-ms 2000 -kills 10   fencelock-bench's figure 6
//	         baseline: concurrency.Election leaders (-mode election-failover-child) SIGKILLed, standby timed
//	goclient ... -mode elect -value V          v3electionpb: campaign, leader, proclaim, observe, exclusion, resign
//
// -tls-ca FILE (with -tls-cert FILE -tls-key FILE for mutual TLS) connects over TLS, through clientv3's Config.TLS;
// -user NAME with $FENCELOCK_GO_PASSWORD authenticates with etcd's Auth (clientv3's Config.Username and Password).
//
// Output lines (stdout): "LOCKED key=<key> rev=<revision>", "UNLOCKED", "TIMEOUT"; in foreign mode "DENIED <call>"
// or "ALLOWED <call>: <outcome>" per call, exit 4 if any was allowed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "fencelockd address")
	name := flag.String("name", "", "lock name")
	ttl := flag.Int64("ttl", 5, "lease TTL in seconds")
	mode := flag.String("mode", "hold", "hold | worker")
	hold := flag.Duration("hold", 0, "how long to hold each lock (hold mode: 0 = until killed)")
	wait := flag.Duration("wait", 0, "give up waiting for the lock after this long (0 = forever)")
	iterations := flag.Int("iterations", 1, "worker mode: lock/unlock cycles")
	referee := flag.String("referee", "", "faults-worker: the safety suite's referee HOST:PORT")
	client := flag.String("client", "", "faults-worker: the client slot (c1…)")
	ttlMs := flag.Int64("ttl-ms", 2000,
		"faults-worker, election-failover: the TTL in ms (the lease gets it in whole seconds, rounded up)")
	kills := flag.Int("kills", 10, "election-failover: leaders killed")
	holdSpread := flag.Int64("hold-spread-ms", 0, "election-failover: kills held back by steps over this span")
	seed := flag.Int64("seed", 0, "faults-worker: random seed")
	key := flag.String("key", "register", "faults-worker: the referee's key")
	unlockTimeout := flag.Duration("unlock-timeout", envDuration("FENCELOCK_GO_UNLOCK_TIMEOUT", -1),
		"faults-worker: client deadline of Unlock (default $FENCELOCK_GO_UNLOCK_TIMEOUT, else one TTL; 0 = none)")
	victim := flag.String("victim", "", "foreign mode: another client's lock key (NAME/<lease id in hex>)")
	value := flag.String("value", "goclient", "elect mode: the value to campaign with")
	tlsCA := flag.String("tls-ca", "", "connect over TLS, trusting this PEM CA")
	tlsCert := flag.String("tls-cert", "", "mutual TLS: this PEM client certificate (with -tls-key)")
	tlsKey := flag.String("tls-key", "", "mutual TLS: the PEM key of -tls-cert")
	user := flag.String("user", "", "authenticate as this user, with the password in $FENCELOCK_GO_PASSWORD")
	flag.Parse()
	tlsConf, err := tlsConfig(*tlsCA, *tlsCert, *tlsKey)
	if err != nil {
		fail("%v", err)
	}
	if *mode == "faults-worker" {
		if *referee == "" || *client == "" || *name == "" {
			fail("faults-worker needs -referee, -client and -name")
		}
		if *unlockTimeout < 0 {
			*unlockTimeout = time.Duration(*ttlMs) * time.Millisecond // a real client's deadline
		}
		runFaultsWorker(workerConfig{endpoint: *endpoint, referee: *referee, client: *client, name: *name, key: *key,
			ttl: time.Duration(*ttlMs) * time.Millisecond, unlockTimeout: *unlockTimeout, seed: *seed})
		return
	}
	if *mode == "election-failover" || *mode == "election-failover-child" {
		if *name == "" || *kills < 1 {
			fail("%s needs -name and -kills ≥ 1", *mode)
		}
		c := failoverConfig{endpoints: strings.Split(*endpoint, ","), name: *name,
			ttl: time.Duration(*ttlMs) * time.Millisecond, kills: *kills,
			spread: time.Duration(*holdSpread) * time.Millisecond}
		if *mode == "election-failover" {
			runElectionFailover(c)
		} else {
			runElectionChild(c)
		}
		return
	}
	if *name == "" && *mode != "foreign" {
		fail("-name is required")
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, TLS: tlsConf,
		Username: *user, Password: os.Getenv("FENCELOCK_GO_PASSWORD")})
	if err != nil {
		fail("connect: %v", err)
	}
	defer cli.Close()
	ctx := context.Background()
	if *mode == "foreign" {
		os.Exit(runForeign(ctx, cli, *victim))
	}

	// Bounded: a refused TLS handshake shows as UNAVAILABLE, which clientv3 would retry for ever.
	gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
	lease, err := cli.Grant(gctx, *ttl)
	gcancel()
	if err != nil {
		fail("lease grant: %v", err)
	}
	alive, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		fail("lease keep-alive: %v", err)
	}
	go func() {
		for range alive {
		}
		fmt.Fprintln(os.Stderr, "goclient: keep-alive stream ended")
	}()

	if *mode == "elect" {
		runElect(ctx, cli, *name, lease.ID, *ttl, *value)
		if _, err := cli.Revoke(ctx, lease.ID); err != nil {
			fail("lease revoke: %v", err)
		}
		return
	}
	locks := v3lockpb.NewLockClient(cli.ActiveConnection())
	n := 1
	if *mode == "worker" {
		n = *iterations
	} else if *mode != "hold" {
		fail("unknown -mode %q", *mode)
	}
	for i := 0; i < n; i++ {
		key, rev, err := LockOnce(ctx, locks, []byte(*name), int64(lease.ID), *wait)
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			fmt.Println("TIMEOUT")
			os.Exit(3)
		}
		if err != nil {
			fail("lock %q: %v", *name, err)
		}
		fmt.Printf("LOCKED key=%s rev=%d\n", key, rev)
		if *mode == "hold" && *hold == 0 {
			select {} // held until killed: the lease's expiry must free the lock
		}
		time.Sleep(*hold)
		if err := Unlock(ctx, locks, key); err != nil {
			fail("unlock %q: %v", key, err)
		}
		fmt.Println("UNLOCKED")
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		fail("lease revoke: %v", err)
	}
}

// LockOnce takes lock name for lease through the v3lock service, waiting up to wait (0 = forever), and returns the
// ownership key and the header revision, which fencelockd makes the fencing token.
// opts go to the call (the safety-suite worker reads fencelockd's error trailer).
func LockOnce(ctx context.Context, locks v3lockpb.LockClient, name []byte, lease int64, wait time.Duration,
	opts ...grpc.CallOption) ([]byte, int64, error) {
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	resp, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: name, Lease: lease}, opts...)
	if err != nil {
		return nil, 0, err
	}
	return resp.Key, resp.Header.Revision, nil
}

// Unlock releases the lock whose ownership key Lock returned.
func Unlock(ctx context.Context, locks v3lockpb.LockClient, key []byte, opts ...grpc.CallOption) error {
	_, err := locks.Unlock(ctx, &v3lockpb.UnlockRequest{Key: key}, opts...)
	return err
}

// envDuration reads a duration from the environment (unset if unset); a bad value is an error naming the variable.
func envDuration(name string, unset time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return unset
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fail("%s=%q: %v", name, v, err)
	}
	return d
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goclient: "+format+"\n", args...)
	os.Exit(1)
}
