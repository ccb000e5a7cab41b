package slogobserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
	"github.com/llmclient/llmclient/slogobserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuf is a concurrency-safe buffer of JSON records.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger(b *logBuf, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

func req() *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")},
		Metadata: map[string]string{"tenant": "acme", "user": "u-42"}}
}

func newClient(t *testing.T, p llmclient.Provider, obs func(context.Context, llmclient.Event), opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(append(opts, llmclient.WithObserver(obs),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-secret-1"}}))...)
	require.NoError(t, err)
	return c
}

// levelsOf returns each record's message and level, in order.
func levelsOf(recs []map[string]any) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r["level"].(string) + " " + r["msg"].(string)
	}
	return out
}

// A failed attempt the call recovered from is below WARN; the call that fails is at WARN.
func TestDefaultLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		p := fake.New(fake.Fail(429).RetryAfter(time.Second), fake.Reply("ok").Usage(10, 2), fake.Fail(400))
		c := newClient(t, p, slogobserver.New(newLogger(&b, slog.LevelDebug)))
		_, err := c.Complete(context.Background(), req())
		require.NoError(t, err)
		_, err = c.Complete(context.Background(), req())
		require.Error(t, err)
		recs := b.records(t)
		assert.Equal(t, []string{
			"INFO llmclient attempt", "INFO llmclient key_cooldown", "DEBUG llmclient attempt", "DEBUG llmclient call",
			"INFO llmclient attempt", "WARN llmclient call",
		}, levelsOf(recs))
		first := recs[0]
		assert.Equal(t, "attempt", first["event"])
		assert.Equal(t, 1.0, first["call_id"])
		assert.Equal(t, "a", first["upstream"])
		assert.Equal(t, "m", first["model"])
		assert.Equal(t, "key#1", first["key"])
		assert.Equal(t, "rate_limited", first["class"])
		assert.Equal(t, 429.0, first["status"])
		assert.Equal(t, "0s", first["latency"], "durations as strings by default")
		assert.NotContains(t, first, "tenant", "metadata only when named")
		second := recs[2]
		waited, err := time.ParseDuration(second["waited"].(string))
		require.NoError(t, err)
		assert.InDelta(t, float64(time.Second), float64(waited), float64(100*time.Millisecond), "the Retry-After, jittered")
		assert.Equal(t, true, second["retry"])
		assert.Equal(t, 10.0, second["input_tokens"])
		call := recs[3]
		assert.Equal(t, 2.0, call["attempts"])
		assert.Equal(t, "none", call["class"])
		latency, err := time.ParseDuration(call["latency"].(string))
		require.NoError(t, err)
		assert.Equal(t, waited, latency, "the wait was the whole call")
		assert.Equal(t, "stop", call["finish_reason"])
		failedCall := recs[5]
		assert.Equal(t, 2.0, failedCall["call_id"])
		assert.Equal(t, "bad_request", failedCall["class"])
		assert.Contains(t, failedCall["error"], "llmclient:")
		assert.NotContains(t, b.String(), "sk-secret-1")
	})
}

func TestOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		p := fake.New(fake.Reply("ok").Latency(1500*time.Millisecond), fake.Fail(400))
		obs := slogobserver.New(newLogger(&b, slog.LevelDebug),
			slogobserver.WithDurations(slogobserver.DurationSeconds),
			slogobserver.WithGroup("llmclient"),
			slogobserver.WithAttrs(slog.String("service", "checkout")),
			slogobserver.WithMetadata("tenant", "absent"),
			slogobserver.WithLevel(event.Call, slog.LevelInfo, slog.LevelError),
			slogobserver.WithLevel(event.Attempt, slog.LevelDebug-4, slog.LevelDebug-4))
		c := newClient(t, p, obs)
		_, err := c.Complete(context.Background(), req())
		require.NoError(t, err)
		_, err = c.Complete(context.Background(), req())
		require.Error(t, err)
		recs := b.records(t)
		assert.Equal(t, []string{"INFO llmclient call", "ERROR llmclient call"}, levelsOf(recs), "attempts turned off")
		r := recs[0]
		assert.Equal(t, "checkout", r["service"], "WithAttrs outside the group")
		g, ok := r["llmclient"].(map[string]any)
		require.True(t, ok, "event attributes in the group: %v", r)
		assert.Equal(t, "call", g["event"])
		assert.Equal(t, 1.5, g["latency"], "seconds")
		assert.Equal(t, "acme", g["metadata.tenant"])
		assert.NotContains(t, g, "metadata.user")
		assert.NotContains(t, g, "metadata.absent")
	})
}

func TestNativeDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		p := fake.New(fake.Reply("ok").Latency(time.Second))
		c := newClient(t, p, slogobserver.New(newLogger(&b, slog.LevelDebug), slogobserver.WithDurations(slogobserver.DurationNative)))
		_, err := c.Complete(context.Background(), req())
		require.NoError(t, err)
		recs := b.records(t)
		require.NotEmpty(t, recs)
		assert.Equal(t, float64(time.Second), recs[0]["latency"], "slog.Duration: nanoseconds in JSON")
	})
}

// The breaker opening is a warning, its half-opening is not; a canceled call is not a
// failure; below the handler's level nothing is logged.
func TestBreakerCanceledAndDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		p := fake.New(fake.Fail(500).Times(2), fake.Reply("slow").Latency(time.Hour))
		c := newClient(t, p, slogobserver.New(newLogger(&b, slog.LevelInfo)), llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second}))
		for range 2 {
			_, err := c.Complete(context.Background(), req())
			require.Error(t, err)
		}
		time.Sleep(2 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		_, err := c.Complete(ctx, req())
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []string{
			"INFO llmclient attempt", "WARN llmclient call",
			"WARN llmclient breaker", "INFO llmclient attempt", "WARN llmclient call",
			"INFO llmclient breaker",
		}, levelsOf(b.records(t)), "the canceled attempt and call are DEBUG, below the handler's INFO")
		recs := b.records(t)
		assert.Equal(t, "closed", recs[2]["from"])
		assert.Equal(t, "open", recs[2]["to"])
		assert.Equal(t, "half-open", recs[5]["to"])
	})
}

// A hedge logs at INFO with its target; the hedged attempt is flagged.
func TestHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		slow := fake.New(fake.Reply("late").Latency(time.Hour))
		fast := fake.New(fake.Reply("ok"))
		c, err := llmclient.New(llmclient.WithObserver(slogobserver.New(newLogger(&b, slog.LevelDebug))),
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: slow}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: fast}),
			llmclient.WithHedging("", routing.Hedge{On: true, Delay: time.Second}))
		require.NoError(t, err)
		_, err = c.Complete(context.Background(), req())
		require.NoError(t, err)
		recs := b.records(t)
		assert.Equal(t, []string{"INFO llmclient hedge", "DEBUG llmclient attempt", "DEBUG llmclient attempt", "DEBUG llmclient call"},
			levelsOf(recs), "the canceled loser logs at the success level")
		assert.Equal(t, "a", recs[0]["upstream"])
		assert.Equal(t, "b", recs[0]["target"])
		assert.Equal(t, 2.0, recs[0]["attempt"])
		var hedged []any
		for _, r := range recs[1:3] {
			hedged = append(hedged, r["hedge"])
		}
		assert.ElementsMatch(t, []any{nil, true}, hedged)
	})
}

// Embedding calls are marked; cache events log at DEBUG with their similarity and age.
func TestEmbedAndCacheEvents(t *testing.T) {
	var b logBuf
	obs := slogobserver.New(newLogger(&b, slog.LevelDebug))
	c := newClient(t, fake.New(fake.Embedding(2)), obs)
	_, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "emb", Input: []string{"x"}})
	require.NoError(t, err)
	obs(context.Background(), llmclient.Event{Kind: event.CacheHit, Model: "m", Semantic: true,
		Similarity: 0.97, Age: 3 * time.Second})
	recs := b.records(t)
	assert.Equal(t, []string{"DEBUG llmclient attempt", "DEBUG llmclient call", "DEBUG llmclient cache_hit"}, levelsOf(recs))
	assert.Equal(t, true, recs[0]["embed"])
	assert.Equal(t, true, recs[1]["embed"])
	assert.Equal(t, true, recs[2]["semantic"])
	assert.Equal(t, 0.97, recs[2]["similarity"])
	assert.Equal(t, "3s", recs[2]["age"])
}

// Costs are logged on attempts and calls; a budget's soft threshold at WARN, its cap at
// ERROR, with the budget's state.
func TestCostAndBudget(t *testing.T) {
	var b logBuf
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
	require.NoError(t, err)
	p := fake.New(fake.Reply("ok").Usage(1_000_000, 0).Forever())
	c, err := llmclient.New(llmclient.WithObserver(slogobserver.New(newLogger(&b, slog.LevelDebug))),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Prices: map[string]*pricing.Model{"": m}}),
		llmclient.WithBudget(budget.Budget{Name: "daily", Cap: 3 * pricing.Dollar / 2, Soft: []float64{0.5},
			Unpriced: budget.UnpricedAllow}))
	require.NoError(t, err)
	r := req()
	r.MaxTokens = 1
	for range 3 {
		_, _ = c.Complete(context.Background(), r)
	}
	recs := b.records(t)
	var budgets []map[string]any
	for _, rec := range recs {
		if rec["event"] == "budget" {
			budgets = append(budgets, rec)
		}
	}
	require.Len(t, budgets, 2)
	assert.Equal(t, "WARN", budgets[0]["level"])
	assert.Equal(t, "daily", budgets[0]["budget"])
	assert.Equal(t, 0.5, budgets[0]["fraction"])
	assert.Equal(t, "$1.00", budgets[0]["spent"])
	assert.Equal(t, "$1.50", budgets[0]["cap"])
	assert.Equal(t, "ERROR", budgets[1]["level"])
	assert.Equal(t, true, budgets[1]["hard"])
	assert.Equal(t, "budget_exceeded", budgets[1]["class"])
	assert.Equal(t, "$1.00", recs[0]["cost"], "the first attempt: 1M input tokens at $1/MTok")
	assert.Equal(t, 1.0, recs[0]["cost_usd"])
}

// An operator control logs at INFO with what it did, and a key eviction with its end.
func TestControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		c := newClient(t, fake.New(fake.Reply("ok")), slogobserver.New(newLogger(&b, slog.LevelDebug)))
		require.NoError(t, c.Drain("a", true))
		require.NoError(t, c.EvictKey("a", "key#1"))
		recs := b.records(t)
		assert.Equal(t, []string{"INFO llmclient control", "INFO llmclient control"}, levelsOf(recs))
		assert.Equal(t, "drain", recs[0]["action"])
		assert.Nil(t, recs[0]["until"], "a drain ends at no set time")
		assert.Equal(t, "key_evict", recs[1]["action"])
		assert.Equal(t, "key#1", recs[1]["key"])
		at, _ := recs[1]["until"].(string)
		until, err := time.Parse(time.RFC3339Nano, at)
		require.NoError(t, err)
		assert.True(t, until.After(time.Now()), "the eviction's end: %v", until)
		assert.NotContains(t, b.String(), "sk-secret-1")
	})
}

// While a breaker is open, its refusals do not flood the log: the state change is logged
// once, local refusals at DEBUG, and refused calls once per interval per upstream, the
// next one counting those left out.
func TestRefusalsAreNotLoggedPerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b logBuf
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, p, slogobserver.New(newLogger(&b, slog.LevelInfo)))
		require.NoError(t, c.ForceBreakerOpen("a"))
		for range 300 { // 6 s of calls
			_, err := c.Complete(context.Background(), req())
			require.Error(t, err)
			time.Sleep(20 * time.Millisecond)
		}
		recs := b.records(t)
		assert.Equal(t, []string{"WARN llmclient breaker", "INFO llmclient control", "WARN llmclient call"}, levelsOf(recs))
		time.Sleep(5 * time.Second)
		_, err := c.Complete(context.Background(), req())
		require.Error(t, err)
		recs = b.records(t)
		require.Len(t, recs, 4)
		assert.Equal(t, "WARN llmclient call", levelsOf(recs)[3])
		assert.Equal(t, 299.0, recs[3]["refused_unlogged"])
	})
}
