package main

// The safety suite's worker through fencelockd (tests/faults/README.md, "The worker protocol"): the loop of the Rust,
// Python and Node workers on etcd's own clients. One etcd lease per acquisition (Grant + KeepAlive), the lock taken
// with LockOnce, the header revision as the fencing token; the keep-alive stream ending is the lost notification.
// etcd's lock API has no reentrancy, so there is no nested acquire (P8 does not apply).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type workerConfig struct {
	endpoint, referee, client, name, key string
	ttl, unlockTimeout                   time.Duration
	seed                                 int64
}

// tRef reads CLOCK_MONOTONIC through the raw syscall, the history's one clock (Go never goes through libc).
func tRef() uint64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		fail("clock_gettime: %v", errno)
	}
	return uint64(ts.Sec)*1_000_000_000 + uint64(ts.Nsec)
}

// emitter writes the JSON-lines events; the keep-alive watchers share it.
type emitter struct {
	mu     sync.Mutex
	client string
	pid    int
	seq    uint64
}

func (o *emitter) emit(kind, f, session string, token int64, code string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := map[string]any{
		"src": "worker", "type": kind, "f": f, "client": o.client, "lang": "go", "pid": o.pid, "seq": o.seq,
		"t_ref": tRef(),
	}
	o.seq++
	if session != "" {
		e["session"] = session
	}
	if token > 0 {
		e["token"] = token
	}
	if code != "" {
		e["error"] = code
	}
	line, _ := json.Marshal(e)
	os.Stdout.Write(append(line, '\n'))
}

type referee struct {
	conn net.Conn
	r    *bufio.Reader
}

type refereeReply struct {
	Ok     [3]bool  `json:"ok"`
	Values [3]int64 `json:"values"`
	Error  string   `json:"error"`
}

func (r *referee) call(req map[string]any) (refereeReply, error) {
	var reply refereeReply
	line, _ := json.Marshal(req)
	if _, err := r.conn.Write(append(line, '\n')); err != nil {
		return reply, err
	}
	in, err := r.r.ReadBytes('\n')
	if err != nil {
		return reply, err
	}
	if err := json.Unmarshal(in, &reply); err != nil {
		return reply, fmt.Errorf("%v: %s", err, in)
	}
	if reply.Error != "" {
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}

// errorCode maps a gRPC error onto DESIGN.md §5's codes: fencelockd's fencelock-error trailer names the kind when
// the call read it (FAILED_PRECONDITION is LOCK_LOST or NOT_HELD), else the gRPC code decides.
func errorCode(err error, trailer metadata.MD) string {
	var known kindError
	if errors.As(err, &known) {
		return known.code
	}
	if kind := trailer.Get("fencelock-error"); len(kind) > 0 {
		return kind[0]
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "TIMEOUT"
	}
	if errors.Is(err, context.Canceled) {
		return "CANCELLED"
	}
	code := status.Code(err)
	var etcdErr rpctypes.EtcdError // clientv3 turns the statuses it knows into these
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.DeadlineExceeded:
		return "TIMEOUT"
	case codes.FailedPrecondition:
		return "NOT_HELD"
	case codes.NotFound: // the lease is gone: its locks went with it
		return "LOCK_LOST"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.Aborted:
		return "FENCED"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.Canceled:
		return "CANCELLED"
	}
	if errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}

// kindError is an error whose §5 code is already known.
type kindError struct {
	error
	code string
}

// class is the protocol's outcome of a failed call: a timeout is definite (`fail`), anything else `info`.
func class(code string) string {
	if code == "TIMEOUT" {
		return "fail"
	}
	return "info"
}

// hold is one acquisition: its lease, the keep-alive that carries it, and whether it was lost.
type hold struct {
	lease  clientv3.LeaseID
	key    []byte
	token  int64
	cancel context.CancelFunc
	alive  <-chan *clientv3.LeaseKeepAliveResponse
	lost   atomic.Bool
	ending atomic.Bool // release started: the keep-alive stream ending is ours, not a loss
}

func runFaultsWorker(c workerConfig) {
	out := &emitter{client: c.client, pid: os.Getpid()}
	var stop atomic.Bool
	go func() { // stdin EOF: finish the cycle and exit
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				break
			}
		}
		stop.Store(true)
	}()
	conn, err := net.Dial("tcp", c.referee)
	if err != nil {
		fail("referee %s: %v", c.referee, err)
	}
	ref := &referee{conn: conn, r: bufio.NewReader(conn)}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail("connect %s: %v", c.endpoint, err)
	}
	defer cli.Close()
	locks := v3lockpb.NewLockClient(cli.ActiveConnection())
	ttlS := int64((c.ttl + time.Second - 1) / time.Second) // etcd leases have whole seconds: round up
	if ttlS < 1 {
		ttlS = 1
	}
	rng := rand.New(rand.NewSource(c.seed ^ int64(os.Getpid())))
	scaled := func(lo, hi float64) time.Duration {
		return time.Duration(float64(c.ttl) * (lo + (hi-lo)*rng.Float64()))
	}
	for n := 1; !stop.Load(); {
		out.emit("invoke", "acquire", "", 0, "")
		h, err := acquire(cli, locks, c, ttlS)
		if err != nil {
			code := errorCode(err, nil)
			out.emit(class(code), "acquire", "", 0, code)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		session := fmt.Sprintf("%s.%d.%d", c.client, out.pid, n)
		n++
		out.emit("ok", "acquire", session, h.token, "")
		go watch(h, out, session)
		if err := criticalSection(cli, h, c, ref, out, session, rng, scaled); err != nil {
			fail("referee: %v", err)
		}
		out.emit("invoke", "release", session, h.token, "")
		h.ending.Store(true)
		// A deadline of one TTL by default, as a real client has: fencelockd ends the etcd lease when it loses the
		// backend lock, so the keep-alive stream tells of a loss even when Unlock times out (tests/faults/README.md).
		uctx, ucancel := context.Background(), context.CancelFunc(func() {})
		if c.unlockTimeout > 0 {
			uctx, ucancel = context.WithTimeout(uctx, c.unlockTimeout)
		}
		var trailer metadata.MD
		if err := Unlock(uctx, locks, h.key, grpc.Trailer(&trailer)); err != nil {
			out.emit("fail", "release", session, h.token, errorCode(err, trailer))
		} else {
			out.emit("ok", "release", session, h.token, "")
		}
		ucancel()
		ctx, cancel := context.WithTimeout(context.Background(), c.ttl)
		cli.Revoke(ctx, h.lease) // the lease was this hold's alone
		cancel()
		h.cancel()
		time.Sleep(scaled(0, 0.1))
	}
}

// acquire grants a lease, keeps it alive and takes the lock with it within 3×TTL; on failure the lease is revoked.
func acquire(cli *clientv3.Client, locks v3lockpb.LockClient, c workerConfig, ttlS int64) (*hold, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*c.ttl)
	defer cancel()
	lease, err := cli.Grant(ctx, ttlS)
	if err != nil {
		return nil, err
	}
	kctx, kcancel := context.WithCancel(context.Background())
	alive, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		kcancel()
		return nil, err
	}
	h := &hold{lease: lease.ID, cancel: kcancel, alive: alive}
	var trailer metadata.MD
	key, rev, err := LockOnce(ctx, locks, []byte(c.name), int64(lease.ID), 0, grpc.Trailer(&trailer))
	if err != nil {
		err = kindError{err, errorCode(err, trailer)}
		rctx, rcancel := context.WithTimeout(context.Background(), c.ttl)
		cli.Revoke(rctx, lease.ID)
		rcancel()
		kcancel()
		return nil, err
	}
	h.key, h.token = key, rev
	return h, nil
}

// watch emits `lost` once the keep-alive stream of a hold ends (clientv3 closes it when the lease is gone or no
// keep-alive was answered within the TTL) or reports no TTL left, unless the hold is being released. Responses that
// come before the lock is taken are dropped by clientv3 (its channel is buffered), never blocking it.
func watch(h *hold, out *emitter, session string) {
	for resp := range h.alive {
		if resp.TTL <= 0 {
			break
		}
	}
	h.lost.Store(true)
	if !h.ending.Load() {
		out.emit("lost", "lost", session, h.token, "LOCK_LOST")
	}
	for range h.alive {
	}
}

func criticalSection(cli *clientv3.Client, h *hold, c workerConfig, ref *referee, out *emitter, session string,
	rng *rand.Rand, scaled func(lo, hi float64) time.Duration) error {
	base := func(op string) map[string]any {
		return map[string]any{"op": op, "key": c.key, "client": c.client, "session": session, "token": h.token}
	}
	reply, err := ref.call(base("read"))
	if err != nil {
		return err
	}
	if !reply.Ok[0] {
		return nil // the fence says someone newer has been here: leave
	}
	values := reply.Values
	time.Sleep(scaled(0.1, 1.5)) // work; the long tail crosses the TTL, so the keep-alive must carry it
	writes := 1
	if rng.Float64() < 0.3 {
		writes = 2
	}
	for i := 0; i < writes; i++ {
		if h.lost.Load() { // a careful user: no write once the client said the lock is lost
			return nil
		}
		w := base("write")
		w["values"] = [3]int64{values[0] + 1, values[1] + 1, values[2] + 1}
		reply, err := ref.call(w)
		if err != nil {
			return err
		}
		if !reply.Ok[0] {
			return nil
		}
		values = reply.Values
		if i == 0 {
			// The explicit renewal: one keep-alive, ok iff the lease still has a TTL.
			out.emit("invoke", "renew", session, h.token, "")
			ctx, cancel := context.WithTimeout(context.Background(), c.ttl)
			resp, err := cli.KeepAliveOnce(ctx, h.lease)
			cancel()
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
				out.emit("fail", "renew", session, h.token, "LOCK_LOST")
			case err != nil:
				out.emit("fail", "renew", session, h.token, errorCode(err, nil))
			default:
				out.emit("ok", "renew", session, h.token, "")
			}
			if writes > 1 {
				time.Sleep(scaled(0, 0.3))
			}
		}
	}
	return nil
}
