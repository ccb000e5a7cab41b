package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// Every go-redis UniversalClient is a Scripter, which is what New takes.
var _ redis.Scripter = redis.UniversalClient(nil)

// startCluster starts n redis-server nodes in cluster mode, splits the 16384 hash slots
// between them, joins them and waits until every node says the cluster is ok.
func startCluster(t *testing.T, n int) []*redisServer {
	t.Helper()
	nodes := make([]*redisServer, n)
	busPorts := make([]int, n)
	for i := range nodes {
		busPorts[i] = freePort(t)
		nodes[i] = startRedisWith(t, serverConfig{args: []string{"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-port", strconv.Itoa(busPorts[i]),
			"--cluster-node-timeout", "5000"}})
	}
	admin := make([]*redis.Client, n)
	for i, node := range nodes {
		admin[i] = node.client()
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := admin[i].Do(ctx(t), "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			t.Fatalf("node %d: CLUSTER ADDSLOTSRANGE: %v", i, err)
		}
	}
	for i := 1; i < n; i++ {
		if err := admin[0].Do(ctx(t), "cluster", "meet", "127.0.0.1", nodes[i].port, busPorts[i]).Err(); err != nil {
			t.Fatalf("CLUSTER MEET: %v", err)
		}
	}
	want := []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(n), "cluster_slots_assigned:16384"}
	for i, a := range admin {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			info, err := a.ClusterInfo(ctx(t)).Result()
			ok := err == nil
			for _, w := range want {
				ok = ok && strings.Contains(info, w)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: the cluster did not form: %v\n%s", i, err, info)
			}
		}
	}
	return nodes
}

// startSentinel starts a master and a Sentinel that monitors it as "mymaster".
func startSentinel(t *testing.T) (master, sentinel *redisServer) {
	t.Helper()
	master = startRedis(t)
	sentinel = startRedisWith(t, serverConfig{sentinel: fmt.Sprintf(
		"sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 60000\n", master.port)})
	return master, sentinel
}

// clientKind builds a go-redis client of one kind, closed when the test ends.
type clientKind struct {
	name string
	// servers are the plain servers whose keys the test inspects.
	servers []*redisServer
	new     func(contextTimeouts bool) redis.UniversalClient
}

func clientKinds(t *testing.T) []clientKind {
	single := startRedis(t)
	cluster := startCluster(t, 2)
	ringA, ringB := startRedis(t), startRedis(t)
	master, sentinel := startSentinel(t)
	clusterAddrs := []string{cluster[0].addr(), cluster[1].addr()}
	failover := func(on bool) *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel.addr()}, ContextTimeoutEnabled: on}
	}
	return []clientKind{
		{"Client", []*redisServer{single}, func(on bool) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: single.addr(), ContextTimeoutEnabled: on})
		}},
		{"UniversalClient/single", []*redisServer{single}, func(on bool) redis.UniversalClient {
			return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{single.addr()}, ContextTimeoutEnabled: on})
		}},
		{"ClusterClient", cluster, func(on bool) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs, ContextTimeoutEnabled: on})
		}},
		{"UniversalClient/cluster", cluster, func(on bool) redis.UniversalClient {
			return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: clusterAddrs, ContextTimeoutEnabled: on})
		}},
		{"Ring", []*redisServer{ringA, ringB}, func(on bool) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": ringA.addr(), "b": ringB.addr()},
				ContextTimeoutEnabled: on})
		}},
		{"FailoverClient/sentinel", []*redisServer{master}, func(on bool) redis.UniversalClient {
			return redis.NewFailoverClient(failover(on))
		}},
		{"UniversalClient/sentinel", []*redisServer{master}, func(on bool) redis.UniversalClient {
			return redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "mymaster", Addrs: []string{sentinel.addr()},
				ContextTimeoutEnabled: on})
		}},
		{"FailoverClusterClient/sentinel", []*redisServer{master}, func(on bool) redis.UniversalClient {
			o := failover(on)
			o.RouteRandomly = true // read-only commands to any node; the store's scripts write
			return redis.NewFailoverClusterClient(o)
		}},
	}
}

// TestClientKinds: New takes every kind of go-redis client (what NewUniversalClient
// returns for one address, several or a Sentinel master name; a Cluster; a Ring; a
// Sentinel failover client, plain or routing reads to replicas), refuses each without
// ContextTimeoutEnabled, and through each, two stores share buckets, pauses and slots,
// with every key of a scope on a single node (one Cluster slot, one Ring shard).
func TestClientKinds(t *testing.T) {
	kinds := clientKinds(t)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			off := k.new(false)
			t.Cleanup(func() { off.Close() })
			if s, err := redisstore.New(off); err == nil || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
				if s != nil {
					s.Close()
				}
				t.Fatalf("New without ContextTimeoutEnabled: %v, want an error", err)
			}
			prefix := "kinds-" + strings.ReplaceAll(k.name, "/", "-")
			stores := make([]*redisstore.Store, 2)
			for i := range stores {
				rdb := k.new(true)
				t.Cleanup(func() { rdb.Close() })
				s, err := redisstore.New(rdb, redisstore.WithFailMode(redisstore.FailClosed), redisstore.WithTimeout(time.Second),
					redisstore.WithPrefix(prefix))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				stores[i] = s
			}
			spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 1}, MaxConcurrent: 1, BatchShare: 1}
			const scopes = 8 // spread over the nodes
			for i := range scopes {
				name := "scope-" + strconv.Itoa(i)
				a, b := stores[0].Open(name, spec), stores[1].Open(name, spec)
				exerciseShared(t, a, b)
			}
			for i, s := range stores {
				if !s.Healthy() {
					t.Fatalf("store %d marked Redis down", i)
				}
			}
			// Where the keys are: each scope's keys on one server, the scopes spread out.
			where := map[string]int{}
			used := map[int]bool{}
			for i, srv := range k.servers {
				keys, err := srv.client().Keys(ctx(t), "{"+prefix+":*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, key := range keys {
					scope := key[:strings.Index(key, "}")+1]
					if j, seen := where[scope]; seen && j != i {
						t.Fatalf("the keys of %s are on two servers", scope)
					}
					where[scope] = i
					used[i] = true
				}
			}
			if len(where) != scopes {
				t.Fatalf("found the keys of %d scopes, want %d: %v", len(where), scopes, where)
			}
			if len(used) != len(k.servers) {
				t.Errorf("the scopes are on %d of %d servers", len(used), len(k.servers))
			}
		})
	}
}

// exerciseShared checks that two states of one scope, through different stores, share
// the request bucket, the pause and the slots, including a slot handed to a waiter.
func exerciseShared(t *testing.T, a, b limitstore.State) {
	t.Helper()
	reserve := func(s limitstore.State) bool {
		_, ok, err := reserveWait(s, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return ok
	}
	if !reserve(a) || reserve(b) {
		t.Fatal("the request bucket is not shared")
	}
	if err := a.Adjust(ctx(t), limitstore.LaneMain, -1, 0); err != nil || !reserve(b) {
		t.Fatalf("a give-back is not shared: %v", err)
	}
	if _, err := report(b, ctx(t), 0); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := a.Pause(ctx(t), time.Minute); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if left, err := pausedFor(b, ctx(t)); err != nil || left <= 0 {
		t.Fatalf("the pause is not shared: %v, %v", left, err)
	}
	la, _, err := a.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatalf("AcquireSlot: %v", err)
	}
	if _, _, err := b.AcquireSlot(ctx(t), interactive, 0); !errors.Is(err, limitstore.ErrRefused) {
		t.Fatalf("the slot is not shared: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, _, err := b.AcquireSlot(context.Background(), interactive, time.Minute)
		if err == nil {
			b.ReleaseSlot(l)
		}
		got <- err
	}()
	a.ReleaseSlot(la)
	if err := <-got; err != nil {
		t.Fatalf("the waiter did not get the released slot: %v", err)
	}
}
