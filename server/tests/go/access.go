package main

// TLS for the Go client, and the foreign mode: a client (another identity under mutual TLS) that tries every call
// on the lease of somebody else's lock, each of which fencelockd must refuse with PERMISSION_DENIED.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tlsConfig is nil without a CA (plaintext), else trusts ca and, given cert and key, presents them.
func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	if ca == "" {
		if cert != "" || key != "" {
			return nil, errors.New("-tls-cert and -tls-key need -tls-ca")
		}
		return nil, nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-tls-ca %s: no PEM certificate", ca)
	}
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %v", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// runForeign tries every call on the lease of victim (a lock key NAME/<hex id>) and prints DENIED or ALLOWED per
// call; the exit status is 0 only if each was PERMISSION_DENIED and LeaseLeases does not list the lease.
func runForeign(ctx context.Context, cli *clientv3.Client, victim string) int {
	slash := strings.LastIndexByte(victim, '/')
	if slash < 0 {
		fail("-victim %q is not a lock key NAME/<lease id in hex>", victim)
	}
	id, err := strconv.ParseInt(victim[slash+1:], 16, 64)
	if err != nil {
		fail("-victim %q: %v", victim, err)
	}
	lease := clientv3.LeaseID(id)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	locks := v3lockpb.NewLockClient(cli.ActiveConnection())
	calls := []struct {
		name string
		call func() error
	}{
		{"KeepAliveOnce", func() error { _, err := cli.KeepAliveOnce(ctx, lease); return err }},
		{"TimeToLive", func() error { _, err := cli.TimeToLive(ctx, lease); return err }},
		{"Revoke", func() error { _, err := cli.Revoke(ctx, lease); return err }},
		{"Lock", func() error {
			_, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(victim[:slash] + "-foreign"), Lease: id})
			return err
		}},
		{"Unlock", func() error { return Unlock(ctx, locks, []byte(victim)) }},
	}
	bad := 0
	for _, c := range calls {
		if err := c.call(); status.Code(err) == codes.PermissionDenied {
			fmt.Println("DENIED", c.name)
		} else {
			fmt.Printf("ALLOWED %s: %v\n", c.name, err)
			bad++
		}
	}
	leases, err := cli.Leases(ctx)
	if err != nil {
		fail("leases: %v", err)
	}
	for _, l := range leases.Leases {
		if l.ID == lease {
			fmt.Println("ALLOWED Leases: lists the foreign lease")
			bad++
		}
	}
	if bad > 0 {
		return 4
	}
	return 0
}
