//go:build !race

package llmclient_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/require"
)

// staticOK answers every request from memory, reading and closing its body.
type staticOK struct{}

func (staticOK) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(chatOK)), ContentLength: int64(len(chatOK)), Request: req}, nil
}

// A failover upstream the call never needs costs the round trip at most the route's
// one allocation: it is not asked about the request's shape again on every call.
func TestTransportFailoverUpstreamCostsNoAllocations(t *testing.T) {
	allocs := func(opts ...llmclient.Option) float64 {
		c := newClient(t, append([]llmclient.Option{oaiUpstream(t, "a", "http://a.test/v1")}, opts...)...)
		rt := c.Transport(staticOK{})
		return testing.AllocsPerRun(200, func() {
			req, _ := http.NewRequest(http.MethodPost, "http://a.test/v1/chat/completions", strings.NewReader(chatBody))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		})
	}
	pb, err := openai.New(openai.WithBaseURL("http://b.test/v1"))
	require.NoError(t, err)
	one := allocs()
	two := allocs(llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb}), llmclient.WithModelGroup("gpt-4o", "a", "b"))
	require.LessOrEqual(t, two-one, 1.0, "allocations a never-needed failover upstream adds per round trip")
}
