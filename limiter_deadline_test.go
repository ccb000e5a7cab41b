package llmclient_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestLimiterAdmitsOnlyWhatFitsBeforeTheDeadline: an upstream whose calls take 3 s. Once
// the Client has learned that, a request whose wait plus those 3 s does not fit before its
// deadline is refused at once — a local refusal, ErrRateLimited, no upstream call — where
// the old limiter admitted it and the call died at the deadline. A request that fits is
// admitted; without a deadline nothing changes.
func TestLimiterAdmitsOnlyWhatFitsBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Usage(12, 400).Latency(3 * time.Second).Forever())
		// 6,000 TPM: 100 tokens a second, a bucket of 1,000. A request costs 12 + 400.
		c := overflowClient(t, p, llmclient.Limits{TPM: 6_000})
		req := func() *llmclient.Request { r := chatReq("m"); r.MaxTokens = 400; return r }
		for range 8 { // learn the service time; each waits for its tokens
			if _, err := c.Complete(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
		}
		// Two requests without a deadline queue up: about 4 s of refill each.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := c.Complete(context.Background(), req()); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(time.Millisecond)
		calls := len(p.Requests())
		// Behind them, a request with 10 s to go would be sent after 8 s or more and
		// finish 3 s later: refused now.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		d := elapsed(func() { _, err = c.Complete(ctx, req()) })
		var e *llmclient.Error
		if !errors.As(err, &e) || !errors.Is(err, llmclient.ErrRateLimited) || d != 0 || !e.Attempts[0].Local {
			t.Fatalf("a request that cannot finish before its deadline: err %v after %v, want a local ErrRateLimited at once", err, d)
		}
		if !strings.Contains(e.Message, "calls take up to") {
			t.Fatalf("message %q does not say why", e.Message)
		}
		if len(p.Requests()) != calls {
			t.Fatal("the refused request reached the upstream")
		}
		// With 30 s to go it is admitted and served.
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Complete(ctx, req()); err != nil {
			t.Fatalf("a request that fits: %v", err)
		}
		wg.Wait()
		// Without a deadline the limiter waits as before.
		if _, err := c.Complete(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
	})
}
