package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/quotasim"
	"github.com/llmclient/llmclient/ratelimit"
)

// windowUpstream enforces 60k TPM over a 6-second quantum (a bucket of 6,000 tokens
// refilled at 1,000 a second), charges a request its max_tokens plus 12 at admission, and
// reports its quantum in x-ratelimit headers unless quiet.
type windowUpstream struct {
	quiet bool

	mu       sync.Mutex
	tok      quotasim.Bucket
	last     time.Time
	rejected int
}

func newWindowUpstream(quiet bool) *windowUpstream {
	return &windowUpstream{quiet: quiet, tok: quotasim.Bucket{Level: 6_000, Capacity: 6_000, Rate: 1_000}, last: time.Now()}
}

func (u *windowUpstream) Complete(_ context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	charge := float64(call.Request.MaxTokens + 12)
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	u.tok.Refill(now.Sub(u.last).Seconds())
	u.last = now
	var rl *ratelimit.Status
	report := func() {
		if !u.quiet {
			rl = &ratelimit.Status{Tokens: ratelimit.Window{Known: true, Limit: 60_000,
				Remaining: int64(u.tok.Level), Reset: u.tok.ResetIn()}}
		}
	}
	if u.tok.Level < charge {
		u.rejected++
		report()
		return nil, &llmclient.Error{Class: failure.RateLimited, Status: 429, RateLimits: rl,
			RetryAfter: time.Duration((charge - u.tok.Level) / u.tok.Rate * float64(time.Second))}
	}
	u.tok.Level -= charge
	report()
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop, RateLimits: rl,
		Usage: llmclient.Usage{InputTokens: 12, OutputTokens: 5, TotalTokens: 17}}, nil
}

func (u *windowUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// TestLimiterLearnsLimitsFromHeaders: a key with no Limits starts limiting at what its
// upstream's headers report, from the first answer on, window included (a 6-second
// quantum behind a per-minute limit): twenty requests of 1,000 tokens go at the upstream's
// pace, none refused by it. Without headers the limiter holds nothing back (the upstream
// refuses what it cannot take, and the Client retries those).
func TestLimiterLearnsLimitsFromHeaders(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			up := newWindowUpstream(quiet)
			c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up}))
			req := chatReq("m")
			req.MaxTokens = 988 // a charge of 1,000
			start := time.Now()
			for range 20 {
				resp, err := c.Complete(context.Background(), req)
				if quiet {
					continue // unlimited: the upstream refuses what it cannot take
				}
				if err != nil {
					t.Fatal(err)
				}
				if a := resp.Attempts[len(resp.Attempts)-1]; len(resp.Attempts) > 1 || a.Status == 429 {
					t.Fatalf("attempts %+v", resp.Attempts)
				}
			}
			d := time.Since(start)
			switch {
			case quiet && up.rejected == 0:
				t.Fatal("without headers the limiter held requests back: the upstream refused none")
			case !quiet && (up.rejected != 0 || d < 13*time.Second):
				// 20,000 tokens through a bucket of 6,000 refilled at 1,000 a second.
				t.Fatalf("with headers: 20 requests in %v, %d refused by the upstream; want ≥ 13s and none", d, up.rejected)
			}
		})
	}
}
