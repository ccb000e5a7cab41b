package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
)

// chatReq is a small request used across tests.
func chatReq(model string) *llmclient.Request {
	return &llmclient.Request{Model: model, Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}
}

func newClient(t *testing.T, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func up(name string, p llmclient.Provider, keys ...string) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, Keys: keys})
}

// eventLog collects observer events safely.
type eventLog struct {
	mu     sync.Mutex
	events []llmclient.Event
}

func (l *eventLog) observe(_ context.Context, e llmclient.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) kinds(k event.Kind) []llmclient.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []llmclient.Event
	for _, e := range l.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// upstreamsOf lists the upstream of each attempt.
func upstreamsOf(trace []llmclient.Attempt) []string {
	out := make([]string, len(trace))
	for i, a := range trace {
		out[i] = a.Upstream
	}
	return out
}

// elapsed runs f and returns the virtual time it took.
func elapsed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

var _ = context.Background
var _ = fake.New
