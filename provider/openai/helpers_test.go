package openai_test

import (
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// reply is what the test server answers.
type reply struct {
	Status int // default 200
	Header map[string]string
	Body   string
}

// upstream is a loopback server that records requests and answers with a fixed reply.
type upstream struct {
	*providertest.Server
}

func newUpstream(t *testing.T, r reply) *upstream {
	t.Helper()
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	kv := make([]string, 0, 2*len(r.Header))
	for k, v := range r.Header {
		kv = append(kv, k, v)
	}
	return &upstream{providertest.NewServer(t, providertest.Fixed(status, r.Body, kv...))}
}

// newProvider returns a provider pointed at u with the server's client.
func newProvider(t *testing.T, u *upstream, opts ...openai.Option) *openai.Provider {
	t.Helper()
	base := []openai.Option{openai.WithBaseURL(u.URL + "/v1"), openai.WithHTTPClient(u.Client())}
	p, err := openai.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func simpleCall(model string) *llmclient.Call {
	return providertest.UserCall(model, llmclient.UserMessage("Hello"))
}
