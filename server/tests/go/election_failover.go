package main

// etcd's own leader election (clientv3/concurrency.Election) through the failover loop of fencelock-bench's figure 6
// (bench/src/failover.rs), as its baseline: each round starts a leader process (this binary in
// election-failover-child mode), waits for its "leading <rev>" line, starts the standby's Campaign here, SIGKILLs the
// leader and times the Campaign's return on the monotonic clock. Output (stdout): "note <text>" lines, then
// "result failover_ns=<n>,<n>,…". The child exits when its stdin closes, so an interrupted driver leaves no leader.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

type failoverConfig struct {
	endpoints []string
	name      string
	ttl       time.Duration
	kills     int
	// The kill of round i (from 1) waits spread·(2i−1)/(2·kills) after "leading", as fencelock-bench's does, so
	// the kills do not phase-lock to the lessor's expiry timer.
	spread time.Duration
}

// failoverStartup bounds a fresh leader's connect and uncontested Campaign.
const failoverStartup = 30 * time.Second

// sessionTTL is the session's TTL in whole seconds (etcd leases have no finer unit), rounded up.
func (c failoverConfig) sessionTTL() int {
	return int(max(1, (c.ttl+time.Second-1)/time.Second))
}

func (c failoverConfig) session() (*clientv3.Client, *concurrency.Session) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		fail("connect: %v", err)
	}
	// The grant bounded (clientv3 retries an unreachable endpoint for ever), but not the session: its context
	// would end its keep-alives.
	ctx, cancel := context.WithTimeout(context.Background(), failoverStartup)
	defer cancel()
	lease, err := cli.Grant(ctx, int64(c.sessionTTL()))
	if err != nil {
		fail("lease grant: %v", err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(c.sessionTTL()), concurrency.WithLease(lease.ID))
	if err != nil {
		fail("session: %v", err)
	}
	return cli, sess
}

// runElectionChild campaigns, says so, and holds (the session keeps its lease alive) until killed or orphaned.
func runElectionChild(c failoverConfig) {
	_, sess := c.session()
	e := concurrency.NewElection(sess, c.name)
	ctx, cancel := context.WithTimeout(context.Background(), failoverStartup)
	defer cancel()
	if err := e.Campaign(ctx, "leader"); err != nil {
		fail("campaign: %v", err)
	}
	fmt.Printf("leading %d\n", e.Rev())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

type campaignResult struct {
	err error
	at  time.Time
}

// runElectionFailover is the driver: the standby, and the leader processes it kills.
func runElectionFailover(c failoverConfig) {
	_, sess := c.session()
	samples := make([]string, 0, c.kills)
	for round := 1; round <= c.kills; round++ {
		leader, rev := startLeader(c)
		time.Sleep(c.spread * time.Duration(2*round-1) / time.Duration(2*c.kills)) // an offset, not a synchronisation
		e := concurrency.NewElection(sess, c.name)
		done := make(chan campaignResult, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*c.ttl+failoverStartup)
		go func() {
			err := e.Campaign(ctx, "standby")
			done <- campaignResult{err, time.Now()}
		}()
		// As on fencelock's side, no wait for the standby to queue first: the dead leader's key outlives the kill
		// by its lease's TTL, so the standby is waiting long before it can win.
		killedAt := time.Now()
		if err := leader.Process.Signal(syscall.SIGKILL); err != nil {
			fail("round %d: kill: %v", round, err)
		}
		r := <-done
		if r.err != nil {
			fail("round %d: the standby's campaign: %v", round, r.err)
		}
		if e.Rev() <= rev {
			fail("round %d: the standby's revision %d is not above the killed leader's %d", round, e.Rev(), rev)
		}
		samples = append(samples, strconv.FormatInt(r.at.Sub(killedAt).Nanoseconds(), 10))
		if err := e.Resign(ctx); err != nil {
			fail("round %d: resign: %v", round, err)
		}
		cancel()
		_ = leader.Wait()
	}
	fmt.Printf("note session TTL %d s (etcd leases count whole seconds), one session for the standby's rounds\n",
		c.sessionTTL())
	fmt.Printf("result failover_ns=%s\n", strings.Join(samples, ","))
}

// startLeader starts a leader process and waits for its "leading <rev>" line.
func startLeader(c failoverConfig) (*exec.Cmd, int64) {
	self, err := os.Executable()
	if err != nil {
		fail("own executable: %v", err)
	}
	cmd := exec.Command(self, "-mode", "election-failover-child", "-endpoint", strings.Join(c.endpoints, ","),
		"-name", c.name, "-ttl-ms", strconv.FormatInt(c.ttl.Milliseconds(), 10))
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil { // held open: its end at our exit ends the child
		fail("leader stdin: %v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail("leader stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		fail("start leader: %v", err)
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		rev, err := strconv.ParseInt(strings.TrimPrefix(l, "leading "), 10, 64)
		if !strings.HasPrefix(l, "leading ") || err != nil {
			_ = cmd.Process.Kill()
			fail("the leader printed %q, expected \"leading <rev>\"", l)
		}
		return cmd, rev
	case <-time.After(failoverStartup):
		_ = cmd.Process.Kill()
		fail("the leader did not lead within %v", failoverStartup)
	}
	panic("unreachable")
}
