package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RoundTrip reads a streamed request body whole before anything else: when the
// request's context ends during that read, it closes the body and returns the context's
// error, as net/http's Transport does, instead of waiting for a body that never ends.
func TestTransportRequestBodyReadEndsWithTheContext(t *testing.T) {
	for name, tc := range map[string]struct {
		end   func(context.Context) (context.Context, context.CancelFunc)
		after time.Duration // when the caller cancels; zero: never
		class failure.Class
		want  error
	}{
		"canceled": {end: context.WithCancel, after: time.Hour, class: failure.Canceled, want: context.Canceled},
		"deadline": {end: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Minute)
		}, class: failure.Timeout, want: context.DeadlineExceeded},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newScript(ok(chatOK))
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
				tr := c.Transport(memTransport{srv})
				pr, pw := io.Pipe() // a body whose writer never writes nor ends it
				ctx, cancel := tc.end(context.Background())
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://oai.test/v1/chat/completions", pr)
				require.NoError(t, err)
				type result struct {
					err  error
					took time.Duration
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					resp, err := tr.RoundTrip(req)
					if resp != nil {
						resp.Body.Close()
					}
					done <- result{err, time.Since(start)}
				}()
				if tc.after > 0 {
					time.Sleep(tc.after)
					cancel()
				}
				r := <-done
				require.Error(t, r.err)
				assert.ErrorIs(t, r.err, tc.want)
				assert.Equal(t, tc.class, llmclient.ClassOf(r.err))
				assert.LessOrEqual(t, r.took, time.Hour, "RoundTrip returns when its context ends")
				synctest.Wait()
				_, err = pw.Write([]byte("x"))
				assert.ErrorIs(t, err, io.ErrClosedPipe, "the body was closed")
			})
		})
	}
}

// A body that ends is read whole under a context that can be canceled, and sent.
func TestTransportRequestBodyStreamedWithCancelableContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(ok(chatOK))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		tr := c.Transport(memTransport{srv})
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
			_ = pw.Close()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://oai.test/v1/chat/completions", pr)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Contains(t, string(body), `"hi"`)
	})
}
