package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// WithCallOptions copies the options: a caller that reuses its header map after the call
// began (for its next call) does not change what the call's later attempts send.
func TestCallOptionsHeadersAreReadOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		n := 0
		a := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
			seen = append(seen, call.Headers.Get("X-Request-Id"))
			n++
			if n == 1 {
				return fake.Fail(503)
			}
			return fake.Reply("ok")
		}).Forever())
		c := newClient(t, up("a", a, "k1"), llmclient.WithBackoff(10*time.Second, 10*time.Second))
		h := http.Header{"X-Request-Id": {"call-1"}}
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Headers: h})
		done := make(chan error, 1)
		go func() {
			_, err := c.Complete(ctx, chatReq("m"))
			done <- err
		}()
		time.Sleep(time.Second) // the first attempt failed; the call is in its backoff
		h.Set("X-Request-Id", "call-2")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2 || seen[1] != "call-1" {
			t.Fatalf("attempts sent X-Request-Id %q, want call-1 on each", seen)
		}
	})
}

// The same for Pin: the caller's Pin slice, changed after the call began, does not change
// where its context fallback goes.
func TestCallOptionsPinIsReadOnce(t *testing.T) {
	pin := []string{"a", "b"}
	a := fake.New(fake.Func(func(*llmclient.Call) fake.Step {
		pin[1] = "c" // the caller reuses its slice once the call is under way
		return fake.FailClass(failure.ContextLength)
	}).Forever())
	b := fake.New(fake.Reply("b").Forever())
	cc := fake.New(fake.Reply("c").Forever())
	c := newClient(t, up("a", a, "k1"), up("b", b, "k2"), up("c", cc, "k3"), llmclient.WithContextFallback("b", "c"))
	ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: pin})
	resp, err := c.Complete(ctx, chatReq("m"))
	if err != nil || resp.Upstream != "b" || cc.Calls() != 0 {
		upstream := ""
		if resp != nil {
			upstream = resp.Upstream
		}
		t.Fatalf("served by %q, err %v; c calls %d: the fallback followed the Pin as changed after the call began", upstream, err, cc.Calls())
	}
}
