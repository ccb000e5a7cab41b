package cache_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type result struct {
	resp *llmclient.Response
	err  error
	at   time.Duration
}

// callAt starts a Complete call after delay, with its own context made by mk, and
// reports its result, and when it came, on the returned channel.
func callAt(cl *llmclient.Client, delay time.Duration, req *llmclient.Request, mk func() (context.Context, context.CancelFunc)) <-chan result {
	out := make(chan result, 1)
	start := time.Now()
	go func() {
		time.Sleep(delay)
		ctx, cancel := mk()
		defer cancel()
		r, err := cl.Complete(ctx, req)
		out <- result{r, err, time.Since(start)}
	}()
	return out
}

func timeout(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
}

func noDeadline() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func TestDedupSharesOneUpstreamCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c, _ := newCache(t, cache.WithDedup(true), cache.WithTTL(0), cache.WithObserver(ev.observe))
		p := fake.New(fake.Reply("shared").Latency(time.Second).Forever())
		cl := client(t, p, c.Middleware())
		var outs []<-chan result
		for i := range 5 {
			outs = append(outs, callAt(cl, time.Duration(i)*100*time.Millisecond, chat("hi"), noDeadline))
		}
		for _, o := range outs {
			r := <-o
			require.NoError(t, r.err)
			assert.Equal(t, "shared", r.resp.Text)
			assert.Equal(t, time.Second, r.at, "everyone gets the answer when it arrives")
			require.Len(t, r.resp.Attempts, 1, "the trace of the shared call")
		}
		assert.Equal(t, 1, p.Calls())
		assert.Equal(t, uint64(4), c.Stats().Shared)
		assert.Len(t, ev.of(cache.EventShared), 4)
		// A different request is not shared.
		r := <-callAt(cl, 0, chat("other"), noDeadline)
		require.NoError(t, r.err)
		assert.Equal(t, 2, p.Calls())
	})
}

// A caller that cancels returns at once; the others keep waiting and get the answer.
func TestDedupCallerCancelDoesNotCancelOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true))
		p := fake.New(fake.Reply("answer").Latency(3 * time.Second))
		cl := client(t, p, c.Middleware())
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		leader := callAt(cl, 0, chat("hi"), func() (context.Context, context.CancelFunc) { return leaderCtx, func() {} })
		follower := callAt(cl, 100*time.Millisecond, chat("hi"), noDeadline)
		short := callAt(cl, 200*time.Millisecond, chat("hi"), timeout(time.Second))
		time.Sleep(500 * time.Millisecond)
		cancelLeader()
		l := <-leader
		assert.Equal(t, failure.Canceled, llmclient.ClassOf(l.err))
		assert.Equal(t, 500*time.Millisecond, l.at, "the leader returns when it cancels")
		s := <-short
		assert.Equal(t, failure.Timeout, llmclient.ClassOf(s.err))
		assert.Equal(t, 1200*time.Millisecond, s.at)
		f := <-follower
		require.NoError(t, f.err)
		assert.Equal(t, "answer", f.resp.Text)
		assert.Equal(t, 3*time.Second, f.at)
		assert.Equal(t, 1, p.Calls())
		// The shared call was stored: the next call is a hit.
		r := <-callAt(cl, 0, chat("hi"), noDeadline)
		require.NoError(t, r.err)
		assert.Equal(t, "answer", r.resp.Text)
		assert.Equal(t, 1, p.Calls())
	})
}

// When every waiter has gone, the shared call is canceled at once.
func TestDedupCanceledWhenEveryWaiterIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true))
		started := make(chan context.Context, 1)
		p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step { return fake.Reply("late").Latency(time.Hour) }))
		cl := client(t, p, llmclient.Middleware(func(next llmclient.Handler) llmclient.Handler {
			return c.Middleware()(llmclient.HandlerFuncs{
				CompleteFunc: func(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
					started <- ctx
					return next.Complete(ctx, req)
				},
				StreamFunc: next.Stream,
			})
		}))
		a := callAt(cl, 0, chat("hi"), timeout(time.Second))
		b := callAt(cl, 0, chat("hi"), timeout(2*time.Second))
		shared := <-started
		assert.Equal(t, failure.Timeout, llmclient.ClassOf((<-a).err))
		synctest.Wait()
		assert.NoError(t, shared.Err(), "one waiter is left")
		assert.Equal(t, failure.Timeout, llmclient.ClassOf((<-b).err))
		synctest.Wait()
		assert.Error(t, shared.Err(), "canceled with its last waiter")
		assert.Equal(t, 0, c.Stats().InFlight)
		assert.Equal(t, 1, p.Calls())
	})
}

// The shared call lasts as long as the latest deadline among its waiters: a later
// follower with a longer deadline gets the answer after the leader's deadline passed.
func TestDedupBoundedByTheLatestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true))
		p := fake.New(fake.Reply("slow").Latency(3 * time.Second))
		cl := client(t, p, c.Middleware())
		leader := callAt(cl, 0, chat("hi"), timeout(time.Second))
		follower := callAt(cl, 500*time.Millisecond, chat("hi"), timeout(5*time.Second))
		assert.Equal(t, failure.Timeout, llmclient.ClassOf((<-leader).err))
		f := <-follower
		require.NoError(t, f.err)
		assert.Equal(t, "slow", f.resp.Text)
		assert.Equal(t, 3*time.Second, f.at)
		assert.Equal(t, 1, p.Calls())
	})
}

// Many callers, canceling at different moments, under the race detector: every caller
// that stays gets the one answer, each round calls the upstream once, nothing is left in
// flight. Virtual time makes the rounds exact whatever the machine's load.
func TestDedupCancellationsRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true), cache.WithTTL(0))
		p := fake.New(fake.Reply("x").Latency(20 * time.Millisecond).Forever())
		cl := client(t, p, c.Middleware())
		for round := range 5 {
			var wg sync.WaitGroup
			var mu sync.Mutex
			answered, canceled := 0, 0
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					if i%3 == 0 {
						time.AfterFunc(time.Duration(i+1)*time.Millisecond, cancel)
					}
					r, err := cl.Complete(ctx, chat("hi"))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						assert.Equal(t, failure.Canceled, llmclient.ClassOf(err))
						canceled++
						return
					}
					assert.Equal(t, "x", r.Text)
					answered++
				}()
			}
			wg.Wait()
			assert.Equal(t, round+1, p.Calls(), "one upstream call per round")
			assert.Equal(t, 13, answered)
			assert.Equal(t, 7, canceled)
			synctest.Wait()
			assert.Equal(t, 0, c.Stats().InFlight)
		}
	})
}

// A caller whose context is already done starts no upstream call.
func TestDedupDeadCallerStartsNothing(t *testing.T) {
	c, _ := newCache(t, cache.WithDedup(true))
	p := fake.New(fake.Reply("x"))
	cl := client(t, p, c.Middleware())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cl.Complete(ctx, chat("hi"))
	assert.Equal(t, failure.Canceled, llmclient.ClassOf(err))
	assert.Equal(t, 0, p.Calls())
}

// The first caller may give up and reuse its Request while the shared call still runs:
// the call's retry sends what was asked, not what the caller changed since.
func TestDedupLeaderReusesItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true))
		p := fake.New(fake.Fail(500), fake.Reply("answer"))
		cl := client(t, p, c.Middleware(), llmclient.WithBackoff(time.Second, time.Second))
		req := chat("original")
		ctx, cancel := context.WithCancel(context.Background())
		leader := make(chan error, 1)
		go func() {
			_, err := cl.Complete(ctx, req)
			leader <- err
		}()
		follower := callAt(cl, 50*time.Millisecond, chat("original"), noDeadline)
		time.Sleep(100 * time.Millisecond)
		cancel()
		require.Error(t, <-leader)
		req.Messages[0].Content[0].Text = "changed" // reused after its call returned
		f := <-follower
		require.NoError(t, f.err)
		assert.Equal(t, "answer", f.resp.Text)
		recs := p.Requests()
		require.Len(t, recs, 2, "the first attempt failed, the retry came after the change")
		assert.Equal(t, "original", recs[1].Request.Messages[0].Text())
	})
}

// A shared call that panics panics in every caller waiting for it, as each would have
// without de-duplication, and leaves nothing in flight: the next call makes a new one.
func TestDedupLeaderPanicReachesEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithDedup(true))
		var mu sync.Mutex
		calls := 0
		h := c.Middleware()(llmclient.HandlerFuncs{CompleteFunc: func(context.Context, *llmclient.Request) (*llmclient.Response, error) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			time.Sleep(time.Second)
			if first {
				panic("adapter bug")
			}
			return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
		}})
		var wg sync.WaitGroup
		panics := make([]any, 3)
		for i := range panics {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { panics[i] = recover() }()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				_, _ = h.Complete(context.Background(), chat("hi"))
			}()
		}
		wg.Wait()
		assert.Equal(t, []any{"adapter bug", "adapter bug", "adapter bug"}, panics)
		assert.Equal(t, 0, c.Stats().InFlight)
		r, err := h.Complete(context.Background(), chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, "ok", r.Text)
		assert.Equal(t, 2, calls)
	})
}

// Shared counts the calls answered by joining a call in flight: a caller that joined and
// gave up before the answer arrived was not answered by it, and reports no EventShared.
func TestDedupSharedCountsOnlyAnsweredCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c, _ := newCache(t, cache.WithDedup(true), cache.WithObserver(ev.observe))
		p := fake.New(fake.Reply("answer").Latency(3 * time.Second))
		cl := client(t, p, c.Middleware())
		leader := callAt(cl, 0, chat("hi"), noDeadline)
		short := callAt(cl, 100*time.Millisecond, chat("hi"), timeout(time.Second))
		follower := callAt(cl, 200*time.Millisecond, chat("hi"), noDeadline)
		assert.Equal(t, failure.Timeout, llmclient.ClassOf((<-short).err))
		require.NoError(t, (<-leader).err)
		require.NoError(t, (<-follower).err)
		assert.Equal(t, uint64(1), c.Stats().Shared)
		assert.Len(t, ev.of(cache.EventShared), 1)
	})
}

// Every waiter of a shared call gets the shared call's trace and cost; the Client's call
// event, which budgets and the otel module's cost metric read, is emitted once.
func TestDedupSharedCostIsTheOneCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log clientEvents
		c, _ := newCache(t, cache.WithDedup(true), cache.WithTTL(0))
		p := fake.New(fake.Reply("shared").Usage(1000, 100).Latency(time.Second).Forever())
		prices := llmclient.WithPricing(nil) // the default table
		req := chat("hi")
		req.Model = "gpt-4o"
		cl := client(t, p, c.Middleware(), llmclient.WithObserver(log.observe), prices)
		var outs []<-chan result
		for i := range 3 {
			outs = append(outs, callAt(cl, time.Duration(i)*100*time.Millisecond, req, noDeadline))
		}
		var resps []llmclient.Response
		for _, o := range outs {
			r := <-o
			require.NoError(t, r.err)
			resps = append(resps, *r.resp)
		}
		require.Len(t, log.of(event.Call), 1, "one call, one call event")
		call := log.of(event.Call)[0]
		require.True(t, call.Cost.Known)
		require.Positive(t, int64(call.Cost.Amount))
		for _, r := range resps {
			assert.Equal(t, call.Cost, r.Cost, "each waiter's copy carries the one call's cost")
			assert.Len(t, r.Attempts, 1)
		}
	})
}
