package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// holderEnv makes the test binary a slot holder instead: it takes one slot of the scope
// "killed" on the Redis at that address, says "held" and waits to be killed.
const holderEnv = "REDISSTORE_TEST_HOLDER"

func TestMain(m *testing.M) {
	if addr := os.Getenv(holderEnv); addr != "" {
		holdSlot(addr)
		return
	}
	redis.SetLogger(quiet{}) // the outage tests make go-redis log every failed dial
	goleak.VerifyTestMain(m,
		// go-redis v9.22's NewFailoverClusterClient (NewUniversalClient with a MasterName and
		// RouteByLatency or RouteRandomly) never closes its Sentinel subscription: Close on
		// the ClusterClient leaves the listener and its PubSub goroutines running (its
		// NewFailoverClient registers the close, this one does not). TestClientKinds shows
		// the store works through it; the leak is go-redis's. The store uses no PubSub, so
		// these exceptions cannot hide a goroutine of its own.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*sentinelFailover).listen"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
	)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// killSpec is the scope the holder process takes a slot of.
var killSpec = limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}

// killTTL is the holder's lease TTL: renewed every third of it, so only a stall of two
// thirds of it could lose the lease before the test kills the holder.
const killTTL = 3 * time.Second

func holdSlot(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	// A generous timeout: a renewal slower than the default on a loaded machine would
	// let the lease expire before the test kills the holder.
	st, err := redisstore.New(rdb, redisstore.WithLeaseTTL(killTTL), redisstore.WithTimeout(time.Second))
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	if _, _, err := st.Open("killed", killSpec).AcquireSlot(context.Background(), false, 0); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("held")
	time.Sleep(time.Minute) // killed long before
	os.Exit(3)
}
