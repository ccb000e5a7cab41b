package llmclient

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func newTestPartitions(t *testing.T, opts ...Option) *partitionLimiter {
	t.Helper()
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.limiter.validate(); err != nil {
		t.Fatal(err)
	}
	return newPartitionLimiter(&cfg.limiter)
}

func tenantReq(name string) *Request {
	return &Request{Model: "m", Metadata: map[string]string{"tenant": name}}
}

func TestPartitionsAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPartitions(t, WithPartitionLimits("tenant", Limits{RPM: 60})) // burst 10
		start := time.Now()
		for range 10 {
			ls, _, err := p.acquire(t.Context(), p.cfg.partitionOf(t.Context(), tenantReq("a")), tenantReq("a"), 1)
			if err != nil {
				t.Fatal(err)
			}
			ls.release(0, true)
		}
		// Tenant a has used its burst; tenant b has not.
		ls, _, err := p.acquire(t.Context(), p.cfg.partitionOf(t.Context(), tenantReq("b")), tenantReq("b"), 1)
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("tenant b: %v after %v, want admitted at once", err, time.Since(start))
		}
		ls.release(0, true)
		ls, _, err = p.acquire(t.Context(), p.cfg.partitionOf(t.Context(), tenantReq("a")), tenantReq("a"), 1)
		if err != nil || time.Since(start) != time.Second {
			t.Fatalf("tenant a: %v after %v, want admitted after 1s", err, time.Since(start))
		}
		ls.release(0, true)
	})
}

func TestPartitionChoice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPartitions(t,
			WithPartitionLimits("tenant", Limits{RPM: 6}), // burst 1
			WithPartitionOverride("vip", Limits{}),        // exempt
		)
		use := func(ctx context.Context, req *Request) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			ls, _, err := p.acquire(ctx, p.cfg.partitionOf(ctx, req), req, 1)
			if err == nil {
				ls.release(0, true)
			}
			return err
		}
		bg := t.Context()
		// The context names the partition when the metadata does not.
		ctxA := WithPartition(bg, "a")
		if PartitionFromContext(ctxA) != "a" || PartitionFromContext(bg) != "" {
			t.Fatal("PartitionFromContext")
		}
		if err := use(ctxA, &Request{}); err != nil {
			t.Fatal(err)
		}
		err := use(ctxA, &Request{})
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrRateLimited) || !strings.Contains(e.Message, `partition "a"`) {
			t.Fatalf("second request of partition a: %v, want rate limited naming the partition", err)
		}
		// Metadata wins over the context: this request is tenant b's.
		if err := use(ctxA, tenantReq("b")); err != nil {
			t.Fatalf("tenant b under a's context: %v", err)
		}
		// Exempt and partition-less requests are not limited.
		for range 5 {
			if err := use(bg, tenantReq("vip")); err != nil {
				t.Fatalf("vip: %v", err)
			}
			if err := use(bg, &Request{}); err != nil {
				t.Fatalf("no partition: %v", err)
			}
		}
	})
}

func TestPartitionLimiterNilAndOff(t *testing.T) {
	var p *partitionLimiter
	if _, _, err := p.acquire(context.Background(), "a", tenantReq("a"), 1); err != nil {
		t.Fatal(err)
	}
	if newTestPartitions(t) != nil {
		t.Fatal("partition limiter without partition options")
	}
}

func TestPartitionIdleOnesAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPartitions(t, WithPartitionLimits("tenant", Limits{RPM: 60}))
		name := func(i int) string { return "t" + strconv.Itoa(i) }
		for i := range partitionSweepMin {
			ls, _, err := p.acquire(t.Context(), p.cfg.partitionOf(t.Context(), tenantReq(name(i))), tenantReq(name(i)), 1)
			if err != nil {
				t.Fatal(err)
			}
			ls.release(0, true)
		}
		time.Sleep(partitionIdle + time.Second)
		ls, _, err := p.acquire(t.Context(), p.cfg.partitionOf(t.Context(), tenantReq("new")), tenantReq("new"), 1)
		if err != nil {
			t.Fatal(err)
		}
		ls.release(0, true)
		n := 0
		p.parts.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%d partitions kept after all but one went idle, want 1", n)
		}
	})
}

// acquire is acquireInto returning the lease, for the tests.
func (p *partitionLimiter) acquire(ctx context.Context, name string, req *Request, cost int) (limitLease, time.Duration, error) {
	var ls limitLease
	waited, err := p.acquireInto(ctx, name, req, cost, &ls)
	return ls, waited, err
}
