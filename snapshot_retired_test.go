package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// A call still running on a key SetKeys removed is in flight on the upstream, in
// Snapshot as in Client.InFlight, until it ends.
func TestSnapshotInFlightAfterKeyRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Latency(time.Minute), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k1"))
		done := make(chan struct{})
		go func() { _, _ = c.Complete(context.Background(), chatReq("m")); close(done) }()
		synctest.Wait()
		if n := c.Snapshot().Upstreams[0].InFlight; n != 1 {
			t.Fatalf("before the update: Snapshot InFlight %d, want 1", n)
		}
		if err := c.Update(llmclient.SetKeys("a", "k2")); err != nil {
			t.Fatal(err)
		}
		s := c.Snapshot().Upstreams[0]
		if s.InFlight != 1 || c.InFlight("a") != 1 {
			t.Errorf("a call in flight on a removed key: Snapshot InFlight %d, Client.InFlight %d, want 1 and 1", s.InFlight, c.InFlight("a"))
		}
		if len(s.Keys) != 1 || s.Keys[0].Label != "key#2" || s.Keys[0].InFlight != 0 {
			t.Errorf("keys %+v, want key#2 alone, idle", s.Keys)
		}
		<-done
		if n := c.Snapshot().Upstreams[0].InFlight; n != 0 || c.InFlight("a") != 0 {
			t.Errorf("after the call: Snapshot InFlight %d, Client.InFlight %d, want 0", n, c.InFlight("a"))
		}
	})
}
