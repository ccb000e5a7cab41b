package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
)

// Claims of docs/operations.md and docs/replicas.md where two controls or a control and a
// replica meet.

// tripPrimary makes replica a open its shared breaker on "primary" (two failures).
func tripPrimary(t *testing.T, a *llmclient.Client) {
	t.Helper()
	for range 2 {
		if _, err := a.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatalf("a call with a backup failed: %v", err)
		}
	}
	if s := a.Breaker("primary").State(); s != breaker.Open {
		t.Fatalf("primary's breaker on a is %v, want open", s)
	}
}

// TestAuditForceBreakerOpenStaysLocal: "ForceBreakerOpen stays local" with
// WithSharedBreakers — the store records no trip and another replica keeps calling.
func TestAuditForceBreakerOpenStaysLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		a := replica(t, store, fake.New(fake.Reply("primary").Forever()))
		onB := fake.New(fake.Reply("primary").Forever())
		b := replica(t, store, onB)
		if err := a.ForceBreakerOpen("primary"); err != nil {
			t.Fatal(err)
		}
		resp, err := a.Complete(context.Background(), chatReq("m"))
		if err != nil || resp.Upstream != "backup" {
			t.Fatalf("a forced open: served by %v, err %v; want backup", upstreamOf(resp), err)
		}
		if left, _ := store.(limitstore.Breakers).BreakerOpen(context.Background(), "primary"); left != 0 {
			t.Errorf("the store records a trip of %v after a local force", left)
		}
		time.Sleep(2 * time.Second)
		resp, err = b.Complete(context.Background(), chatReq("m"))
		if err != nil || resp.Upstream != "primary" || onB.Calls() != 1 {
			t.Errorf("b after a's force: served by %v (err %v, primary calls %d), want primary", upstreamOf(resp), err, onB.Calls())
		}
	})
}

// TestAuditForceBreakerClosedClearsTheSharedTrip: "the breaker that tripped clears the
// record when it closes again (… or ResetBreaker / ForceBreakerClosed)".
func TestAuditForceBreakerClosedClearsTheSharedTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		a := replica(t, store, fake.New(fake.Fail(500).Forever()))
		onB := fake.New(fake.Reply("primary").Forever())
		b := replica(t, store, onB)
		tripPrimary(t, a)
		if resp, err := b.Complete(context.Background(), chatReq("m")); err != nil || resp.Upstream != "backup" {
			t.Fatalf("b during a's trip: served by %v, err %v; want backup", upstreamOf(resp), err)
		}
		if err := a.ForceBreakerClosed("primary"); err != nil {
			t.Fatal(err)
		}
		if left, _ := store.(limitstore.Breakers).BreakerOpen(context.Background(), "primary"); left != 0 {
			t.Errorf("the store still records a trip of %v after ForceBreakerClosed", left)
		}
		time.Sleep(time.Second) // b asks the store again at most once a second
		resp, err := b.Complete(context.Background(), chatReq("m"))
		if err != nil || resp.Upstream != "primary" {
			t.Errorf("b after a's ForceBreakerClosed: served by %v, err %v; want primary", upstreamOf(resp), err)
		}
	})
}

// TestAuditSharedTripLastsAtMostADay: the record's TTL is the open period, at most a day,
// even when the breaker's own open time is longer.
func TestAuditSharedTripLastsAtMostADay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		a := replica(t, store, fake.New(fake.Fail(500).Forever()),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: 72 * time.Hour, SuccessesToClose: 1}))
		tripPrimary(t, a)
		left, err := store.(limitstore.Breakers).BreakerOpen(context.Background(), "primary")
		if err != nil {
			t.Fatal(err)
		}
		if left <= 0 || left > 24*time.Hour {
			t.Errorf("shared trip recorded for %v, want within (0, 24h]", left)
		}
	})
}

// TestAuditDrainHoldsOverForcedClosedBreaker: a drained upstream takes no new call, even
// while its breaker is forced closed; its calls fail over, and Snapshot says drained.
func TestAuditDrainHoldsOverForcedClosedBreaker(t *testing.T) {
	primary := fake.New(fake.Reply("primary").Forever())
	c := newClient(t, up("primary", primary), up("backup", fake.New(fake.Reply("backup").Forever())))
	if err := c.ForceBreakerClosed("primary"); err != nil {
		t.Fatal(err)
	}
	if err := c.Drain("primary", true); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), chatReq("m"))
	if err != nil || resp.Upstream != "backup" || primary.Calls() != 0 {
		t.Errorf("drained and forced closed: served by %v, err %v, primary calls %d; want backup and none",
			upstreamOf(resp), err, primary.Calls())
	}
	s := c.Snapshot().Upstreams[0]
	if s.Serving || s.Refusal != "drained" {
		t.Errorf("snapshot of a drained, forced-closed upstream: Serving %v, Refusal %q; want false, drained", s.Serving, s.Refusal)
	}
}

// TestAuditDrainedUpstreamUnderNoFailoverPinAndHedge: a drained upstream is called by no
// new call, whatever the call options: NoFailover, a Pin naming it first, or a hedge.
// With nowhere else to go, the call fails as unavailable.
func TestAuditDrainedUpstreamUnderNoFailoverPinAndHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("primary").Latency(3 * time.Second).Forever())
		drained := fake.New(fake.Reply("drained").Forever())
		c := newClient(t, up("primary", primary), up("drained", drained),
			llmclient.WithModelGroup("m", "primary", "drained"),
			llmclient.WithHedging("m", routing.Hedge{Delay: 100 * time.Millisecond}))
		if err := c.Drain("drained", true); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Complete(context.Background(), chatReq("m"))
		if err != nil || resp.Upstream != "primary" {
			t.Errorf("hedged call: served by %v, err %v; want primary (no hedge to the drained one)", upstreamOf(resp), err)
		}
		_, err = c.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"drained"}, NoFailover: true}), chatReq("m"))
		if llmclient.ClassOf(err) != failure.Unavailable {
			t.Errorf("pinned to the drained upstream with NoFailover: err %v (class %v), want unavailable", err, llmclient.ClassOf(err))
		}
		if drained.Calls() != 0 {
			t.Errorf("the drained upstream was called %d times", drained.Calls())
		}
	})
}

// TestAuditEvictKeyLastsTheEvictionTime: EvictKey takes the key out "for WithKeyEviction's
// time": not a moment less, and back afterwards without a RestoreKey.
func TestAuditEvictKeyLastsTheEvictionTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k1"), llmclient.WithKeyEviction(10*time.Minute))
		if err := c.EvictKey("a", "key#1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Minute - time.Second)
		_, err := c.Complete(context.Background(), chatReq("m"))
		if !errors.Is(err, llmclient.ErrNoKey) || p.Calls() != 0 {
			t.Errorf("a second before the eviction ends: err %v, calls %d; want ErrNoKey and none", err, p.Calls())
		}
		time.Sleep(2 * time.Second)
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Errorf("after the eviction time: %v", err)
		}
	})
}

// TestAuditCloseIsIdempotentAndUnavailable: after Close, Complete, Stream and a
// Transport's requests fail at once with ErrClosed, classed unavailable; Close again
// returns nil.
func TestAuditCloseIsIdempotentAndUnavailable(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, up("a", p))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := c.Complete(context.Background(), chatReq("m"))
	if !errors.Is(err, llmclient.ErrClosed) || llmclient.ClassOf(err) != failure.Unavailable {
		t.Errorf("Complete after Close: %v (class %v)", err, llmclient.ClassOf(err))
	}
	_, err = c.Stream(context.Background(), chatReq("m"))
	if !errors.Is(err, llmclient.ErrClosed) || llmclient.ClassOf(err) != failure.Unavailable {
		t.Errorf("Stream after Close: %v (class %v)", err, llmclient.ClassOf(err))
	}
	if p.Calls() != 0 {
		t.Errorf("the upstream was called %d times after Close", p.Calls())
	}
}

func upstreamOf(r *llmclient.Response) string {
	if r == nil {
		return "<nil>"
	}
	return r.Upstream
}

// TestAuditControlsLetCallsInFlightFinish: "Every control acts at once on the calls that
// start afterwards; calls in flight finish as they are": a stream and a one-shot call in
// flight on key#1 of the primary finish whole after ForceBreakerOpen and EvictKey of that
// key, while the next call goes to the backup.
func TestAuditControlsLetCallsInFlightFinish(t *testing.T) {
	for _, control := range []string{"ForceBreakerOpen", "EvictKey", "Drain", "ResetBreaker"} {
		synctest.Test(t, func(t *testing.T) {
			primary := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Forever())
			c := newClient(t, up("primary", primary, "k1"), up("backup", fake.New(fake.Reply("backup").Forever())))
			s, err := c.Stream(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan *llmclient.Response, 1)
			go func() {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				if err != nil {
					t.Errorf("%s: the one-shot call in flight: %v", control, err)
				}
				done <- resp
			}()
			synctest.Wait()
			switch control {
			case "ForceBreakerOpen":
				err = c.ForceBreakerOpen("primary")
			case "EvictKey":
				err = c.EvictKey("primary", "key#1")
			case "Drain":
				err = c.Drain("primary", true)
			case "ResetBreaker":
				err = c.ResetBreaker("primary")
			}
			if err != nil {
				t.Fatal(err)
			}
			if control != "ResetBreaker" {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				if err != nil || resp.Upstream != "backup" {
					t.Errorf("%s: the next call: %v, err %v; want backup", control, upstreamOf(resp), err)
				}
			}
			text := ""
			for s.Next() {
				text += s.Current().Text
			}
			if s.Err() != nil || text != "abc" {
				t.Errorf("%s: the stream in flight: %q, err %v; want abc", control, text, s.Err())
			}
			_ = s.Close()
			if resp := <-done; resp != nil && (resp.Text != "abc" || resp.Upstream != "primary") {
				t.Errorf("%s: the one-shot call in flight: %q from %s", control, resp.Text, resp.Upstream)
			}
		})
	}
}

// TestAuditSharedTripClearedFreesEveryRoutingStrategy: WithSharedBreakers says "a
// breaker that closed on another replica frees the upstream everywhere within about a
// second" — under every routing strategy, including those that route around an upstream
// that cannot serve and so make no attempt there that would ask the store.
func TestAuditSharedTripClearedFreesEveryRoutingStrategy(t *testing.T) {
	for _, pol := range []routing.Policy{routing.Ordered, routing.Weighted, routing.LeastInFlight, routing.Latency} {
		synctest.Test(t, func(t *testing.T) {
			store := limitstore.NewMemory()
			replica := func(p *fake.Provider) *llmclient.Client {
				return newClient(t, llmclient.WithLimitStore(store), llmclient.WithSharedBreakers("x"), llmclient.WithMaxAttempts(1),
					up("x", p), up("y", fake.New(fake.Reply("y").Forever())), llmclient.WithModelGroup("chat", "x", "y"),
					llmclient.WithRouting("chat", pol),
					llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Hour, SuccessesToClose: 1}))
			}
			a := replica(fake.New(fake.Fail(500).Forever()))
			onB := fake.New(fake.Reply("x").Forever())
			b := replica(onB)
			for range 2 {
				_, _ = a.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"x"}}), chatReq("chat"))
			}
			if a.Breaker("x").State() != breaker.Open {
				t.Fatalf("policy %v: a's breaker did not open", pol)
			}
			for range 3 { // b sees the trip
				if _, err := b.Complete(context.Background(), chatReq("chat")); err != nil {
					t.Fatal(err)
				}
			}
			if n := onB.Calls(); n != 0 {
				t.Fatalf("policy %v: b called x %d times during the trip", pol, n)
			}
			if err := a.ResetBreaker("x"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond)
			for range 20 {
				if _, err := b.Complete(context.Background(), chatReq("chat")); err != nil {
					t.Fatal(err)
				}
			}
			if onB.Calls() == 0 {
				t.Errorf("policy %v: b never called x in 20 calls after the trip was cleared (Refusal %q)", pol, b.Snapshot().Upstreams[0].Refusal)
			}
		})
	}
}

// TestAuditRestoreKeyReachesAReplicaThatSawTheEviction: RestoreKey lifts "a limit store's
// pause and eviction for every replica sharing the store" — also for a replica that
// already met the eviction: after the restore, it calls the key again.
func TestAuditRestoreKeyReachesAReplicaThatSawTheEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		pa := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
			if call.APIKey == "sk-one" {
				return fake.Fail(401)
			}
			return fake.Reply("ok")
		}).Times(1 << 20))
		a := newClient(t, up("u", pa, "sk-one"), llmclient.WithLimitStore(store), llmclient.WithMaxAttempts(1))
		pb := fake.New(fake.Reply("ok").Forever())
		b := newClient(t, up("u", pb, "sk-one", "sk-two"), llmclient.WithLimitStore(store))
		if _, err := a.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("a 401: want an error")
		}
		for range 4 {
			if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range pb.Requests() {
			if r.APIKey == "sk-one" {
				t.Fatalf("b called the key a evicted")
			}
		}
		restoreAndExpectUsed(t, a, b, pb, 10)
	})
}

// TestAuditEvictKeyReachesEveryReplica: EvictKey with a shared store evicts the key "in
// the store" too: a replica sharing it no longer calls that key, and RestoreKey on the
// first replica brings it back for both.
func TestAuditEvictKeyReachesEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		a := newClient(t, up("u", fake.New(fake.Reply("ok").Forever()), "sk-one", "sk-two"), llmclient.WithLimitStore(store))
		pb := fake.New(fake.Reply("ok").Forever())
		b := newClient(t, up("u", pb, "sk-one", "sk-two"), llmclient.WithLimitStore(store))
		if err := a.EvictKey("u", "key#1"); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range pb.Requests() {
			if r.APIKey == "sk-one" {
				t.Fatal("b called the key a evicted")
			}
		}
		restoreAndExpectUsed(t, a, b, pb, 6)
	})
}

// TestAuditContinuationAvoidsAnUpstreamThatCannotServe: a broken stream is continued "on
// the next upstream of the route (the same one when none is left)"; a next upstream that
// is drained or forced open is not one that is left: the stream continues on its own
// upstream and the caller reads the whole answer, never calling the other.
func TestAuditContinuationAvoidsAnUpstreamThatCannotServe(t *testing.T) {
	for _, control := range []string{"drain", "force open"} {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2), fake.Stream("one ", "two ", "three").Forever())
			b := fake.New(fake.Stream("one ", "two ", "three").Forever())
			c := newClient(t, up("a", a), up("b", b))
			var err error
			if control == "drain" {
				err = c.Drain("b", true)
			} else {
				err = c.ForceBreakerOpen("b")
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Stream(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			text, err := readAll(s)
			if err != nil || text != "one two three" {
				t.Errorf("%s: text %q, err %v; want the whole answer", control, text, err)
			}
			if b.Calls() != 0 || a.Calls() != 2 {
				t.Errorf("%s: calls a %d, b %d; want a twice, b never", control, a.Calls(), b.Calls())
			}
		})
	}
}

// restoreAndExpectUsed restores key#1 ("sk-one") of upstream u on replica a, lets a
// second pass (virtual time), and fails unless replica b, whose provider is pb, calls
// that key again within n calls.
func restoreAndExpectUsed(t *testing.T, a, b *llmclient.Client, pb *fake.Provider, n int) {
	t.Helper()
	if err := a.RestoreKey("u", "key#1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	before := len(pb.Requests())
	for range n {
		if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range pb.Requests()[before:] {
		if r.APIKey == "sk-one" {
			return
		}
	}
	t.Errorf("b never used the restored key in %d calls; its snapshot: %+v", n, b.Snapshot().Upstreams[0].Keys)
}
