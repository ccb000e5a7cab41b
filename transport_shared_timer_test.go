package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// On the real clock (outside a synctest bubble) the transport's attempts share one timer:
// an attempt that outlives its attempt timeout is canceled by it and fails with
// failure.Timeout, the base transport seeing its request's context end with
// ErrAttemptTimeout as the cause; the attempt after it is bounded again. Real time, 20 ms
// per attempt: the shared timer only runs on the real clock.
func TestSharedTimerCancelsAHungAttempt(t *testing.T) {
	c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), llmclient.WithAttemptTimeout(20*time.Millisecond),
		llmclient.WithMaxAttempts(1), llmclient.WithCallBudget(0))
	causes := make(chan error, 2)
	rt := c.Transport(rtFunc(func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		causes <- context.Cause(req.Context())
		return nil, req.Context().Err()
	}))
	for i := range 2 { // two calls (different bodies: the second is no repeat of the first)
		start := time.Now()
		body := fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"call %d"}]}`, i)
		_, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", body)
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.Timeout || !errors.Is(err, llmclient.ErrAttemptTimeout) {
			t.Fatalf("round trip: %v, want a failure.Timeout *Error wrapping ErrAttemptTimeout", err)
		}
		if cause := <-causes; !errors.Is(cause, llmclient.ErrAttemptTimeout) {
			t.Fatalf("the request's context ended with %v, want ErrAttemptTimeout", cause)
		}
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Fatalf("canceled after %v, before the attempt timeout", d)
		}
	}
}

// The shared timer, armed for an attempt's ten minutes, does not keep its Transport in
// memory once the attempt has ended: a Transport nobody uses any more is collected.
func TestSharedTimerDoesNotHoldItsTransport(t *testing.T) {
	collected := make(chan struct{})
	func() {
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), llmclient.WithAttemptTimeout(10*time.Minute))
		rt := c.Transport(rtFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(chatOK)), ContentLength: int64(len(chatOK)), Request: req}, nil
		}))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", chatBody)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = readBody(t, resp)
		runtime.AddCleanup(rt, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatal("the Transport was not collected while its timer was armed")
}
