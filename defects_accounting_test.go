package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Accounting, hooks, options and numbers: edge cases.

// A panicking observer leaves nothing held: the panic reaches the caller after
// the Client's state is settled.
func TestDefect10PanickingObserverLeaksNothing(t *testing.T) {
	panicking := true
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
		Limits: llmclient.Limits{MaxConcurrent: 1}}),
		llmclient.WithPartitionLimits("tenant", llmclient.Limits{MaxConcurrent: 1}),
		llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
			if panicking && e.Kind == event.Attempt {
				panic("observer bug")
			}
		}))
	req := chatReq("m")
	req.Metadata = map[string]string{"tenant": "t1"}
	// A leaked slot would make the next call wait: a deadline turns that into an error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.PanicsWithValue(t, "observer bug", func() { _, _ = c.Complete(ctx, req) })
	assert.Equal(t, 0, c.InFlight("a"))

	assert.PanicsWithValue(t, "observer bug", func() {
		s, err := c.Stream(ctx, req)
		require.NoError(t, err)
		for s.Next() {
		}
	})
	assert.Equal(t, 0, c.InFlight("a"))

	panicking = false
	_, err := c.Complete(ctx, req)
	require.NoError(t, err, "the slot, the key and the partition's lease came back")
}

// The partition's wait is Waited, not Latency; a stream's Latency is the whole
// stream and its time to first token is recorded apart; a 200 is recorded as such on
// success and on interruption; Usage.Estimated marks the Client's own estimate;
// ContinuationRequest sees through wrapping.
func TestDefect11Accounting(t *testing.T) {
	t.Run("partition wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Reply("slow").Latency(5*time.Second), fake.Reply("fast").Latency(time.Second))
			c := newClient(t, up("a", p), llmclient.WithPartitionLimits("", llmclient.Limits{MaxConcurrent: 1}))
			ctx := llmclient.WithPartition(context.Background(), "t")
			go func() { _, _ = c.Complete(ctx, chatReq("m")) }()
			synctest.Wait()
			resp, err := c.Complete(ctx, chatReq("m"))
			require.NoError(t, err)
			at := resp.Attempts[0]
			assert.Equal(t, 5*time.Second, at.Waited)
			assert.Equal(t, time.Second, at.Latency)
			assert.Equal(t, http.StatusOK, at.Status)
		})
	})
	t.Run("stream timing and status", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b", "c").StallFirst(3*time.Second).ChunkDelay(time.Second),
				fake.Stream("a", "b").CutAfter(1))
			var log eventLog
			c := newClient(t, up("a", p), llmclient.WithObserver(log.observe), llmclient.WithMaxAttempts(1))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			for s.Next() {
			}
			require.NoError(t, s.Err())
			at := s.Response().Attempts[0]
			assert.Equal(t, 3*time.Second, at.TimeToFirstToken)
			assert.Equal(t, 5*time.Second, at.Latency, "the whole stream")
			assert.Equal(t, http.StatusOK, at.Status)

			s, err = c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			for s.Next() {
			}
			require.Error(t, s.Err())
			assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(s.Err()))
			ev := log.kinds(event.Attempt)
			require.Len(t, ev, 2)
			assert.Equal(t, http.StatusOK, ev[0].Status)
			assert.Equal(t, http.StatusOK, ev[1].Status, "a 200 arrived before the cut")
		})
	})
	t.Run("estimated usage", func(t *testing.T) {
		p := fake.New(fake.Reply("four score and seven years").Usage(0, 0))
		c := newClient(t, up("a", p))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.True(t, resp.Usage.Estimated)
		assert.Positive(t, resp.Usage.InputTokens)
		assert.Positive(t, resp.Usage.OutputTokens)
	})
	t.Run("continuation through wrapping", func(t *testing.T) {
		p := fake.New(fake.Stream("partial ", "answer").CutAfter(1))
		c := newClient(t, up("a", p))
		req := chatReq("m")
		s, err := c.Stream(context.Background(), req)
		require.NoError(t, err)
		for s.Next() {
		}
		wrapped := fmt.Errorf("my handler: %w", s.Err())
		next := llmclient.ContinuationRequest(req, wrapped)
		require.NotNil(t, next)
		assert.Equal(t, "partial ", next.Messages[len(next.Messages)-1].Text())
	})
}

// Numeric options are checked in New or clamped as documented; none panics,
// overflows or silently changes behaviour.
func TestDefect12NumericOptions(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	for _, tc := range []struct {
		name string
		opt  llmclient.Option
	}{
		{"budget window of 5ns", llmclient.WithRetryBudget(0.3, 10, 5*time.Nanosecond)},
		{"NaN budget ratio", llmclient.WithRetryBudget(math.NaN(), 10, time.Second)},
		{"infinite budget ratio", llmclient.WithRetryBudget(math.Inf(1), 10, time.Second)},
		{"negative budget floor", llmclient.WithRetryBudget(0.3, -1, time.Second)},
		{"backoff of MaxInt64", llmclient.WithBackoff(time.Second, math.MaxInt64)},
		{"negative backoff", llmclient.WithBackoff(-time.Second, time.Second)},
		{"zero attempts", llmclient.WithMaxAttempts(0)},
		{"negative total attempts", llmclient.WithMaxTotalAttempts(-1)},
		{"negative max Retry-After", llmclient.WithMaxRetryAfter(-1)},
		{"negative key cooldown", llmclient.WithKeyCooldown(-1)},
		{"zero key eviction", llmclient.WithKeyEviction(0)},
		{"negative wait threshold", llmclient.WithWaitThreshold(ratelimit.Interactive, -1)},
		{"unknown priority", llmclient.WithWaitThreshold(ratelimit.Priority(9), time.Second)},
		{"negative idle timeout", llmclient.WithIdleTimeout(-1)},
		{"NaN batch share", llmclient.WithBatchShare(math.NaN())},
		{"NaN burst fraction", llmclient.WithBurstFraction(math.NaN())},
		{"NaN token ratio", llmclient.WithTokenRatio("x", math.NaN())},
		{"zero reserved output", llmclient.WithReservedOutput(0)},
	} {
		_, err := llmclient.New(up("a", p), tc.opt)
		assert.Error(t, err, tc.name)
	}
	// Huge values that are valid work, and do not overflow.
	for _, opt := range []llmclient.Option{
		llmclient.WithMaxAttempts(math.MaxInt), llmclient.WithMaxTotalAttempts(math.MaxInt),
		llmclient.WithMaxRetryAfter(math.MaxInt64), llmclient.WithKeyCooldown(math.MaxInt64),
		llmclient.WithKeyEviction(math.MaxInt64), llmclient.WithAttemptTimeout(math.MaxInt64),
		llmclient.WithFirstTokenTimeout(math.MaxInt64), llmclient.WithIdleTimeout(math.MaxInt64),
		llmclient.WithStreamTimeout(math.MaxInt64), llmclient.WithMaxWait(math.MaxInt64),
		llmclient.WithReservedOutput(math.MaxInt), llmclient.WithWaitThreshold(ratelimit.Batch, math.MaxInt64),
		llmclient.WithRetryBudget(1000, math.MaxInt, 24*time.Hour),
	} {
		synctest.Test(t, func(t *testing.T) { // a request of MaxInt tokens waits for a minute's quota
			c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
				Limits: llmclient.Limits{RPM: math.MaxInt, TPM: math.MaxInt, MaxConcurrent: math.MaxInt}}), opt)
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "ok", resp.Text)
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			for s.Next() {
			}
			require.NoError(t, s.Err())
		})
	}
}

// In transport mode, WithMaxReplayBody(MaxInt64) is clamped; the body arrives whole.
func TestDefect12MaxReplayBodyClamped(t *testing.T) {
	up := newScript(ok(chatOK))
	c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
	rt := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(math.MaxInt64))
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", body)
	require.NoError(t, err)
	got, err := readBody(t, resp)
	require.NoError(t, err)
	assert.Equal(t, chatOK, got)
	require.Len(t, up.requests(), 1)
	assert.Equal(t, body, up.requests()[0].Body)
}

// openaiOver registers an OpenAI upstream whose HTTP goes through h in process.
func openaiOver(t *testing.T, name string, h http.Handler, keys ...string) llmclient.Option {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL("http://"+name+".test/v1"),
		openai.WithHTTPClient(&http.Client{Transport: memTransport{h}}))
	require.NoError(t, err)
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, Keys: keys})
}

// Key blocks saturate instead of overflowing, and a cooldown never outlasts the
// key eviction time, whatever Retry-After the upstream sends.
func TestDefect13KeyBlocksSaturateAndAreCapped(t *testing.T) {
	t.Run("eviction of MaxInt64", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
				if call.APIKey == "k1" {
					return fake.Fail(401)
				}
				return fake.Reply("ok")
			}).Forever())
			c := newClient(t, up("a", p, "k1", "k2"), llmclient.WithKeyEviction(math.MaxInt64))
			for range 5 {
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
			}
			keys := map[string]int{}
			for _, r := range p.Requests() {
				keys[r.APIKey]++
			}
			assert.Equal(t, 1, keys["k1"], "the evicted key is never used again")
		})
	})
	for _, ra := range []string{"1000000000000000000", "Fri, 31 Dec 9999 23:59:59 GMT", "Wed, 01 Jan 2200 00:00:00 GMT"} {
		t.Run("Retry-After "+ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []string
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					calls = append(calls, r.Header.Get("Authorization"))
					if len(calls) == 1 {
						w.Header().Set("Retry-After", ra)
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(429)
						_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, chatOK)
				})
				c := newClient(t, openaiOver(t, "a", h, "k1", "k2"))
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err, "the other key serves at once")
				for range 3 {
					_, err = c.Complete(context.Background(), chatReq("m"))
					require.NoError(t, err)
				}
				for _, a := range calls[1:] {
					assert.Equal(t, "Bearer k2", a, "k1 cools down")
				}
				time.Sleep(time.Hour + time.Second) // the default eviction time caps the cooldown
				n := len(calls)
				for range 4 {
					_, err = c.Complete(context.Background(), chatReq("m"))
					require.NoError(t, err)
				}
				assert.Contains(t, calls[n:], "Bearer k1", "k1 is back after the cap, not in 175 years")
			})
		})
	}
}

// Distinct partition names do not grow memory without bound.
func TestDefect14PartitionsAreBounded(t *testing.T) {
	c := newClient(t, up("a", noopProvider{}), llmclient.WithPartitionLimits("tenant",
		llmclient.Limits{RPM: 600, TPM: 100_000, MaxConcurrent: 4}))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req := chatReq("m")
	for i := range 100_000 {
		req.Metadata = map[string]string{"tenant": "t" + strconv.Itoa(i)}
		_, err := c.Complete(context.Background(), req)
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grown, int64(20<<20), "heap grew by %d bytes for 100,000 partition names", grown)
	runtime.KeepAlive(c)
}

// Tool-call arguments accumulate in linear time and memory; an oversized 2xx
// body or stream event is the upstream's fault (retried, failed over), not unknown.
func TestDefect15LargeOutputs(t *testing.T) {
	t.Run("many tool-call deltas", func(t *testing.T) {
		chunks := make([]llmclient.Chunk, 100_000)
		for i := range chunks {
			chunks[i] = llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: "x"}}}
		}
		chunks[0].ToolCalls[0].ID, chunks[0].ToolCalls[0].Name = "call_1", "f"
		p := fake.New(fake.StreamChunks(chunks...))
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for s.Next() {
		}
		runtime.ReadMemStats(&after)
		require.NoError(t, s.Err())
		require.Len(t, s.Response().ToolCalls, 1)
		assert.Len(t, s.Response().ToolCalls[0].Arguments, len(chunks))
		alloc := after.TotalAlloc - before.TotalAlloc
		assert.Less(t, alloc, uint64(256<<20), "%d bytes allocated for 100k one-byte deltas", alloc)
	})
	big := strings.Repeat("x", 33<<20)
	for name, h := range map[string]http.HandlerFunc{
		"2xx body over 32 MiB": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"`+big+`"}`)
		},
		"stream event over 4 MiB": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\""+big[:5<<20]+"\"}\n\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.New(fake.Reply("b").Forever())
			c := newClient(t, openaiOver(t, "a", h), up("b", b))
			req := chatReq("m")
			var resp *llmclient.Response
			var err error
			if strings.Contains(name, "stream") {
				var s *llmclient.Stream
				s, err = c.Stream(context.Background(), req)
				require.NoError(t, err)
				for s.Next() {
				}
				require.NoError(t, s.Err())
				resp = s.Response()
			} else {
				resp, err = c.Complete(context.Background(), req)
				require.NoError(t, err)
			}
			assert.Equal(t, "b", resp.Upstream)
			assert.Equal(t, failure.ServerError, resp.Attempts[0].Class)
		})
	}
}

// noopProvider answers every call at once and records nothing (the fake keeps a record of
// every call, which a memory test must not count).
type noopProvider struct{}

func (noopProvider) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop,
		Usage: llmclient.Usage{InputTokens: 5, OutputTokens: 1, TotalTokens: 6}}, nil
}

func (noopProvider) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}
