package otel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// An upstream that names a new model in each answer (a router, a hostile or merely
// chatty vendor) must not fill the call metrics with series: past the SDK's cardinality
// limit (2,000 per instrument) every later series, a rate_limited one included, would
// collapse into otel.metric.overflow. The call metrics keep a few response models per
// upstream and request model and record the others as "_OTHER"; the call spans keep the
// name the upstream gave.
func TestResponseModelsInMetricsAreBounded(t *testing.T) {
	r := newRig(t)
	up := &chattyModel{}
	bad := fake.New(fake.Fail(429).Forever())
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: up, Models: map[string]string{"m": "m"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: bad, Models: map[string]string{"other": "other"}}))
	const calls = 2100
	for range calls {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	_, err := c.Complete(context.Background(), chatReq("other"))
	require.Error(t, err)

	ms := r.collect(t)
	d := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
	require.Empty(t, matching(d, map[string]any{"otel.metric.overflow": true}), "no series overflowed")
	require.Len(t, matching(d, map[string]any{"error.type": "rate_limited"}), 1, "the rate_limited call has its own series")
	ok := matching(d, map[string]any{"llmclient.upstream": "a"})
	require.Len(t, ok, 9, "8 response models and _OTHER")
	other := matching(d, map[string]any{"gen_ai.response.model": "_OTHER"})
	require.Len(t, other, 1)
	require.Equal(t, uint64(calls-8), other[0].Count)
	require.Len(t, matching(d, map[string]any{"gen_ai.response.model": "m-000008"}), 1, "the first 8 keep their names")
	tok := wrapHI(histI(t, ms, "gen_ai.client.token.usage"))
	require.Len(t, matching(tok, map[string]any{"gen_ai.response.model": "_OTHER", "gen_ai.token.type": "input"}), 1)

	spans := r.named("chat m")
	require.Len(t, spans, calls)
	require.Equal(t, fmt.Sprintf("m-%06d", calls), attrs(spans[calls-1].Attributes)["gen_ai.response.model"],
		"a call span keeps the response model the upstream named")
}

// chattyModel answers every call with a model name of its own.
type chattyModel struct{ n atomic.Int64 }

func (p *chattyModel) Complete(_ context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "hi", Model: fmt.Sprintf("%s-%06d", call.Model, p.n.Add(1)),
		FinishReason: "stop", Usage: llmclient.Usage{InputTokens: 3, OutputTokens: 1, TotalTokens: 4}}, nil
}

func (p *chattyModel) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, errors.ErrUnsupported
}
