package limitstore_test

import (
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// TestMemoryStoreSweepKeepsSharing: a scope that a sweep of idle scopes dropped while a
// caller still held it (a Client keeps its keys' and partitions' states) is the state a
// later Open of its name returns, so that every caller of a name still shares one quota.
// The store used to hand out a fresh state then: two Clients sharing the store each
// admitted the whole quota.
func TestMemoryStoreSweepKeepsSharing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := limitstore.NewMemory()
		spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1, Burst: 1}, BatchShare: 1}
		a := s.Open("tenant-1", spec) // held by one Client, idle for now
		for i := range 3000 {         // other partitions come and go: the store sweeps
			s.Open("tenant-other-"+strconv.Itoa(i), spec)
		}
		b := s.Open("tenant-1", spec) // another Client's first request of the partition
		if g, err := a.Reserve(t.Context(), limitstore.Reservation{Requests: 1, MaxWait: -1}); err != nil || !g.OK || g.Wait != 0 {
			t.Fatalf("first reservation: %+v, %v", g, err)
		}
		if g, _ := b.Reserve(t.Context(), limitstore.Reservation{Requests: 1, MaxWait: 0}); g.OK || g.Wait != time.Second {
			t.Fatalf("second reservation under the same name after a sweep: %+v, want refused with 1s", g)
		}
		runtime.KeepAlive(a)
	})
}
