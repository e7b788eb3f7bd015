package main

// -mode elect: etcd's own v3electionpb.ElectionClient against fencelockd. It campaigns with -value on its lease, reads
// the leader, proclaims, observes, checks that a second campaign on another lease waits while it leads, and resigns.
// Output lines: "LEADER key=<key> rev=<term>", "PROCLAIMED value=<v>", "OBSERVED value=<v> rev=<r>", "EXCLUDED",
// "RESIGNED", "NO LEADER"; any other outcome exits 1 naming the call.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func runElect(ctx context.Context, cli *clientv3.Client, name string, lease clientv3.LeaseID, ttl int64, value string) {
	elections := v3electionpb.NewElectionClient(cli.ActiveConnection())
	won, err := elections.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte(name), Lease: int64(lease),
		Value: []byte(value)})
	if err != nil {
		fail("campaign %q: %v", name, err)
	}
	leader := won.Leader
	fmt.Printf("LEADER key=%s rev=%d\n", leader.Key, leader.Rev)

	expectLeader(ctx, elections, name, value, leader.Rev)
	next := value + "-proclaimed"
	if _, err := elections.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: leader, Value: []byte(next)}); err != nil {
		fail("proclaim: %v", err)
	}
	expectLeader(ctx, elections, name, next, leader.Rev)
	fmt.Printf("PROCLAIMED value=%s\n", next)

	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	changes, err := elections.Observe(octx, &v3electionpb.LeaderRequest{Name: []byte(name)})
	if err != nil {
		fail("observe: %v", err)
	}
	seen, err := changes.Recv()
	if err != nil {
		fail("observe: %v", err)
	}
	ocancel()
	if seen.Kv == nil || !bytes.Equal(seen.Kv.Value, []byte(next)) {
		fail("observe: %v, expected the value %q", seen.Kv, next)
	}
	fmt.Printf("OBSERVED value=%s rev=%d\n", seen.Kv.Value, seen.Kv.CreateRevision)

	// A rival on a lease of its own waits while this leader leads.
	rival, err := cli.Grant(ctx, ttl)
	if err != nil {
		fail("lease grant: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	_, err = elections.Campaign(wctx, &v3electionpb.CampaignRequest{Name: []byte(name), Lease: int64(rival.ID),
		Value: []byte("rival")})
	wcancel()
	if status.Code(err) != codes.DeadlineExceeded {
		fail("a rival's campaign while another leads: %v, expected DEADLINE_EXCEEDED", err)
	}
	fmt.Println("EXCLUDED")
	if _, err := cli.Revoke(ctx, rival.ID); err != nil {
		fail("revoke the rival's lease: %v", err)
	}

	if _, err := elections.Resign(ctx, &v3electionpb.ResignRequest{Leader: leader}); err != nil {
		fail("resign: %v", err)
	}
	fmt.Println("RESIGNED")
	// etcd answers a leaderless election with an error, not an empty response; fencelockd does the same.
	if _, err := elections.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte(name)}); err == nil {
		fail("leader after resign: a leader, expected none")
	}
	fmt.Println("NO LEADER")
}

func expectLeader(ctx context.Context, elections v3electionpb.ElectionClient, name, value string, rev int64) {
	now, err := elections.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte(name)})
	if err != nil {
		fail("leader: %v", err)
	}
	if now.Kv == nil || !bytes.Equal(now.Kv.Value, []byte(value)) || now.Kv.CreateRevision != rev {
		fail("leader: %v, expected %q at revision %d", now.Kv, value, rev)
	}
}
