package openai_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
)

// recorded is what the test server saw of one request.
type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// reply is what the test server answers.
type reply struct {
	Status int
	Header map[string]string
	Body   string
}

// upstream is a loopback server that records requests and answers with a fixed reply.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	reply reply
}

func newUpstream(t *testing.T, r reply) *upstream {
	t.Helper()
	u := &upstream{reply: r}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, recorded{req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Clone(), body})
		rep := u.reply
		u.mu.Unlock()
		for k, v := range rep.Header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		status := rep.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, rep.Body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last(t *testing.T) recorded {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("upstream received no request")
	}
	return u.reqs[len(u.reqs)-1]
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
	return &llmclient.Call{
		Model:   model,
		Request: &llmclient.Request{Model: model, Messages: []llmclient.Message{llmclient.UserMessage("Hello")}},
	}
}

// completeErr runs Complete and returns its *llmclient.Error, failing when there is none.
func completeErr(t *testing.T, p *openai.Provider, call *llmclient.Call) *llmclient.Error {
	t.Helper()
	resp, err := p.Complete(context.Background(), call)
	if err == nil {
		t.Fatalf("Complete succeeded: %+v", resp)
	}
	e, ok := err.(*llmclient.Error)
	if !ok {
		t.Fatalf("error is %T (%v), want *llmclient.Error", err, err)
	}
	return e
}
