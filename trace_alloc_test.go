package llmclient_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freshOK answers every call with a new response, as an adapter does.
type freshOK struct{}

func (freshOK) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop,
		Usage: llmclient.Usage{InputTokens: 3, OutputTokens: 1}}, nil
}

func (freshOK) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// A call its first attempt serves keeps its one-entry trace in the response: two calls'
// traces never share memory, and what a caller appends to one goes elsewhere.
func TestFirstAttemptTraceIsTheResponses(t *testing.T) {
	c := newClient(t, up("a", freshOK{}, "k1", "k2"))
	ctx := context.Background()
	r1, err := c.Complete(ctx, chatReq("m"))
	require.NoError(t, err)
	r2, err := c.Complete(ctx, chatReq("m"))
	require.NoError(t, err)
	require.Len(t, r1.Attempts, 1)
	require.Len(t, r2.Attempts, 1)
	assert.Equal(t, 1, cap(r1.Attempts), "nothing can be appended in place")
	assert.NotSame(t, &r1.Attempts[0], &r2.Attempts[0])
	r2.Attempts[0].Key = "changed"
	assert.Equal(t, "key#1", r1.Attempts[0].Key, "the second call's entry is its own")
	grown := append(r1.Attempts, llmclient.Attempt{Upstream: "x"})
	assert.Equal(t, "a", r1.Attempts[0].Upstream)
	assert.Len(t, grown, 2)
	assert.Equal(t, llmclient.Usage{InputTokens: 3, OutputTokens: 1}, r1.Attempts[0].Usage)
}
