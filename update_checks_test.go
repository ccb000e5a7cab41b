package llmclient_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdOn returns a provider that holds every call made with the key held until release
// is closed, and answers the others at once.
func holdOn(held string, started chan<- struct{}, release <-chan struct{}) *fake.Provider {
	return fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
		if call.APIKey == held {
			started <- struct{}{}
			<-release
		}
		return fake.Reply("from " + call.APIKey)
	}).Forever())
}

// A removed key whose call is still running keeps its label: a new key never takes it,
// so two secrets never share a label in events and Snapshot.
func TestSetKeysNeverReusesABusyLabel(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	p := holdOn("sk-two", started, release)
	var log eventLog
	c := newClient(t, up("a", p, "sk-one", "sk-two"), llmclient.WithObserver(log.observe))
	require.NoError(t, c.EvictKey("a", "key#1"))
	done := make(chan error, 1)
	go func() {
		_, err := c.Complete(context.Background(), chatReq("m"))
		done <- err
	}()
	<-started // on key#2, sk-two
	require.NoError(t, c.RestoreKey("a", "key#1"))
	require.NoError(t, c.Update(llmclient.SetKeys("a", "sk-one")))
	require.NoError(t, c.Update(llmclient.SetKeys("a", "sk-one", "sk-three")))
	require.NoError(t, c.EvictKey("a", "key#1"))
	resp, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "from sk-three", resp.Text)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, []string{"key#1 evicted", "key#3 ready"}, keyLabels(c, 0))
	var keys []string
	for _, e := range log.kinds(event.Attempt) {
		keys = append(keys, e.Key)
	}
	assert.ElementsMatch(t, []string{"key#2", "key#3"}, keys, "sk-three has a label of its own")
}

// An update that would leave an upstream with no credential at all is refused.
func TestSetKeysRefusesNoKeys(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, up("a", p, "sk-one"))
	err := c.Update(llmclient.SetKeys("a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing changed")
	assert.Contains(t, err.Error(), "no keys")
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "sk-one", p.Requests()[0].APIKey)

	// With a key source left, no static keys is fine.
	src := keysource.Func(func(context.Context) (string, time.Time, error) { return "sk-src", time.Time{}, nil })
	require.NoError(t, c.Update(llmclient.SetKeySources("a", src), llmclient.SetKeys("a")))
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "sk-src", p.Requests()[1].APIKey)
}

func limitsOf(c *llmclient.Client) (rpm, tpm, conc int64) {
	k := c.Snapshot().Upstreams[0].Keys[0]
	if k.Requests != nil {
		rpm = k.Requests.Limit
	}
	if k.Tokens != nil {
		tpm = k.Tokens.Limit
	}
	if k.Concurrency != nil {
		conc = k.Concurrency.Limit
	}
	return rpm, tpm, conc
}

// PatchLimits changes only the fields it is given; SetLimits replaces them all.
func TestPatchLimitsKeepsTheOtherFields(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
		Limits: llmclient.Limits{RPM: 600, TPM: 100_000, MaxConcurrent: 4}}))
	require.NoError(t, c.Update(llmclient.PatchLimits("a", llmclient.Limits{RPM: 300})))
	rpm, tpm, conc := limitsOf(c)
	assert.Equal(t, [3]int64{300, 100_000, 4}, [3]int64{rpm, tpm, conc})
	require.NoError(t, c.Update(llmclient.PatchLimits("a", llmclient.Limits{TPM: 50_000}), llmclient.PatchLimits("a", llmclient.Limits{MaxConcurrent: 2})))
	rpm, tpm, conc = limitsOf(c)
	assert.Equal(t, [3]int64{300, 50_000, 2}, [3]int64{rpm, tpm, conc})
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)

	require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 60})))
	rpm, tpm, conc = limitsOf(c)
	assert.Equal(t, [3]int64{60, 0, 0}, [3]int64{rpm, tpm, conc}, "SetLimits replaces the whole Limits")
}

// Every numeric setting of Update at its edges: refused with a clear error, or taken and
// served.
func TestUpdateNumericEdges(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
		Limits: llmclient.Limits{RPM: 600}}))
	refused := map[string]llmclient.Change{
		"patch negative RPM":     llmclient.PatchLimits("a", llmclient.Limits{RPM: -1}),
		"patch min int TPM":      llmclient.PatchLimits("a", llmclient.Limits{TPM: math.MinInt}),
		"patch negative conc":    llmclient.PatchLimits("a", llmclient.Limits{MaxConcurrent: -5}),
		"patch burst over RPM":   llmclient.PatchLimits("a", llmclient.Limits{RequestBurst: 601}),
		"patch unknown metering": llmclient.PatchLimits("a", llmclient.Limits{Metering: 9}),
		"set negative RPD":       llmclient.SetLimits("a", llmclient.Limits{RPD: -1}),
		"negative timeout":       llmclient.SetTimeout("a", math.MinInt64),
		"negative weight":        llmclient.SetWeight("a", -1),
	}
	for name, ch := range refused {
		err := c.Update(ch)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "nothing changed", name)
	}
	served := map[string]llmclient.Change{
		"patch zero changes nothing": llmclient.PatchLimits("a", llmclient.Limits{}),
		"patch max int RPM":          llmclient.PatchLimits("a", llmclient.Limits{RPM: math.MaxInt}),
		"patch max int everything": llmclient.PatchLimits("a", llmclient.Limits{RPM: math.MaxInt, TPM: math.MaxInt,
			RPD: math.MaxInt, TPD: math.MaxInt, MaxConcurrent: math.MaxInt}),
		"max timeout":    llmclient.SetTimeout("a", math.MaxInt64),
		"max int weight": llmclient.SetWeight("a", math.MaxInt),
		"zero timeout":   llmclient.SetTimeout("a", 0),
		"set zero":       llmclient.SetLimits("a", llmclient.Limits{}),
	}
	for name, ch := range served {
		require.NoError(t, c.Update(ch), name)
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, name)
	}
}

// Update announces what it changed in one event.Control.
func TestUpdateReportsWhatChanged(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	var log eventLog
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
		Limits: llmclient.Limits{RPM: 600}}), llmclient.WithObserver(log.observe))
	require.NoError(t, c.Update(llmclient.PatchLimits("a", llmclient.Limits{RPM: 300}), llmclient.SetTimeout("a", 0),
		llmclient.SetKeys("a", "sk-one", "sk-two")))
	ev := controlEvents(&log)
	require.Len(t, ev, 1)
	assert.Equal(t, "update", ev[0].Action)
	assert.Equal(t, []string{"a.Keys", "a.Limits.RPM"}, ev[0].Changed)
	for _, s := range ev[0].Changed {
		assert.NotContains(t, s, "sk-")
	}
}

// An input- or output-token limit set by Update on a Client that had no token limit meters
// the calls from then on: in fail-fast mode, the second of two calls whose prompts fill the
// new ITPM is refused (before the change both would pass unmetered); so is the second call
// under a new OTPM that the first call's max_tokens fills.
func TestUpdateTokenQuantityStartsMetering(t *testing.T) {
	for _, lim := range []llmclient.Limits{{ITPM: 1200}, {OTPM: 1200}} {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"}}),
			llmclient.WithLimiterMode(ratelimit.FailFast))
		require.NoError(t, c.Update(llmclient.SetLimits("a", lim)))
		req := chatReq("m")
		req.Messages[0] = llmclient.UserMessage(strings.Repeat("lorem ipsum dolor sit amet ", 200)) // ~1,000 tokens
		req.MaxTokens = 1200
		_, err := c.Complete(context.Background(), req)
		require.NoError(t, err, "%+v: first call", lim)
		_, err = c.Complete(context.Background(), req)
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err), "%+v: second call: %v", lim, err)
	}
}
