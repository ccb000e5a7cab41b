package llmclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/slogobserver"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// The slog observer's records hold no prompt or completion text by default: not a
// model's refusal (which a content_filtered error carries), nor a vendor's error message
// that quotes the prompt. WithErrorMessages(true) logs the whole text.
func TestSlogObserverLogsNoCallContent(t *testing.T) {
	const refusal = "COMPLETION-SECRET-4242 I will not help with that"
	const prompt = "PROMPT-SECRET-7777 my medical history is"
	for _, whole := range []bool{false, true} {
		var w syncBuffer
		logger := slog.New(slog.NewJSONHandler(&w, &slog.HandlerOptions{Level: slog.LevelDebug}))
		refusing := fake.New(fake.Reply("").Refusal(refusal))
		echoing := fake.New(fake.Fail(400).Code("invalid_value").Message("Invalid value for 'messages[0].content': '" + prompt + "'"))
		c := newClient(t, up("a", refusing), up("b", echoing),
			llmclient.WithObserver(slogobserver.New(logger, slogobserver.WithErrorMessages(whole))))
		_, err := c.Complete(context.Background(), chatReq("a-model"))
		if err == nil || llmclient.ClassOf(err) != failure.ContentFiltered {
			t.Fatalf("the refused call: %v, want content_filtered", err)
		}
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"b"}})
		if _, err := c.Complete(ctx, &llmclient.Request{Model: "a-model", Messages: []llmclient.Message{llmclient.UserMessage(prompt)}}); err == nil {
			t.Fatal("the call whose error echoes its prompt succeeded")
		}
		logs := w.String()
		for _, secret := range []string{"COMPLETION-SECRET-4242", "PROMPT-SECRET-7777"} {
			if got := strings.Contains(logs, secret); got != whole {
				t.Errorf("WithErrorMessages(%v): records hold %q: %v\n%s", whole, secret, got, logs)
			}
		}
		if !strings.Contains(logs, `"error":"llmclient: bad_request: upstream \"b\": status 400: invalid_value"`) && !whole {
			t.Errorf("the echoing error is not named by its class, upstream, status and code:\n%s", logs)
		}
	}
}

// ErrorSummary names an error by what holds no call content, and keeps the sentinel
// causes it wraps.
func TestErrorSummary(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("quotes the prompt"), ""},
		{context.Canceled, "context canceled"},
		{&llmclient.Error{Class: failure.RateLimited, Upstream: "a", Err: llmclient.ErrRateLimited, Message: "secret"},
			`llmclient: rate_limited: upstream "a": rate limited locally`},
		{&llmclient.Error{Class: failure.BadRequest, Upstream: "b", Status: 400, Type: "invalid_request_error", Message: "secret"},
			`llmclient: bad_request: upstream "b": status 400: invalid_request_error`},
		{&llmclient.Error{Class: failure.ServerError, Status: 500, Code: long}, "llmclient: server_error: status 500: " + long[:64]},
		{&llmclient.Error{Class: failure.Unavailable, Err: llmclient.ErrClosed, Message: "the client is closed"},
			"llmclient: unavailable: the client is closed"},
	} {
		if got := llmclient.ErrorSummary(tc.err); got != tc.want {
			t.Errorf("ErrorSummary(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
