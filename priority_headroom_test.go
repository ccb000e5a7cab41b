package llmclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/ratelimit"
)

// slowUpstream answers after 200 ms (virtual time), counting the batch calls in flight
// and the highest such count.
type slowUpstream struct {
	batchNow, batchPeak atomic.Int64
}

func (p *slowUpstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	if call.Request.Priority == ratelimit.Batch {
		n := p.batchNow.Add(1)
		defer p.batchNow.Add(-1)
		for peak := p.batchPeak.Load(); n > peak && !p.batchPeak.CompareAndSwap(peak, n); peak = p.batchPeak.Load() {
		}
	}
	select {
	case <-time.After(200 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llmclient.Response{Text: "ok", Usage: llmclient.Usage{InputTokens: 10, OutputTokens: 490, TotalTokens: 500}}, nil
}

func (*slowUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// headroomRun saturates one key (600 RPM, 60,000 TPM, 5 calls at once) with 20 callers of
// batch traffic through Complete for 30 s, then makes 5 interactive calls, and returns the
// longest an interactive call waited for admission, the batch calls' peak in flight and
// the batch calls completed.
func headroomRun(t *testing.T, opts ...llmclient.Option) (interactiveWait time.Duration, batchPeak, batchDone int64) {
	up := &slowUpstream{}
	c := newClient(t, append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up,
		Limits: llmclient.Limits{RPM: 600, TPM: 60_000, MaxConcurrent: 5}}),
		llmclient.WithMaxWait(time.Minute))...)
	ctx, cancel := context.WithCancel(context.Background())
	var done atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req := chatReq("m")
				req.MaxTokens, req.Priority = 480, ratelimit.Batch
				if _, err := c.Complete(ctx, req); err == nil {
					done.Add(1)
				}
			}
		})
	}
	time.Sleep(30 * time.Second)
	for range 5 {
		req := chatReq("m")
		req.MaxTokens = 480
		resp, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatalf("interactive call under batch saturation: %v", err)
		}
		interactiveWait = max(interactiveWait, resp.Attempts[0].Waited)
	}
	cancel()
	wg.Wait()
	return interactiveWait, up.batchPeak.Load(), done.Load()
}

// TestPriorityHeadroomThroughClient: batch calls saturating a key through Complete keep
// to their share (80% of the slots and of the token rate by default), so interactive calls
// are admitted at once; with WithBatchShare(1) batch takes the whole key and the same
// interactive calls wait.
func TestPriorityHeadroomThroughClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wait, peak, done := headroomRun(t)
		if wait != 0 {
			t.Errorf("an interactive call waited %v under batch saturation, want 0", wait)
		}
		if peak != 4 {
			t.Errorf("batch peak in flight %d, want 4 (80%% of 5 slots)", peak)
		}
		// At about 500 tokens a call, batch got at most its share of the tokens in 30 s:
		// 80% of the refill (30 × 1,000/s) and of the burst (10,000), plus the calls in flight.
		if most := int64(0.8*(10_000+30*1_000))/500 + 5; done > most || done == 0 {
			t.Errorf("batch completed %d calls in 30 s, want 1 to %d (its share)", done, most)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		wait, peak, _ := headroomRun(t, llmclient.WithBatchShare(1))
		if wait == 0 || peak != 5 {
			t.Errorf("with batch on equal terms: interactive waited %v, batch peak %d; want a wait and 5", wait, peak)
		}
	})
}
