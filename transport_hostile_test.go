package llmclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// brokenBody is a request body that fails after its first bytes, and counts its Closes.
type brokenBody struct {
	r      io.Reader
	closes atomic.Int32
}

var errCallerDisk = errors.New("disk gone")

func (b *brokenBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, errCallerDisk
}

func (b *brokenBody) Close() error { b.closes.Add(1); return nil }

// A caller whose request body fails mid-read gets a failure.BadRequest *Error wrapping its
// body's error; its body is closed, as a RoundTripper must, nothing reaches the upstream
// and nothing stays held. So does one whose GetBody fails, for a body too large to buffer.
func TestTransportBrokenRequestBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(chatOK))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		rt := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(1024))

		body := &brokenBody{r: strings.NewReader(`{"model":"gpt-4o","messages":[`)}
		req, err := http.NewRequest(http.MethodPost, chatURL, body)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.Nil(t, resp)
		assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, errCallerDisk)
		assert.Equal(t, int32(1), body.closes.Load(), "the caller's body is closed once")

		large := strings.Repeat("x", 4096)
		req, err = http.NewRequest(http.MethodPost, chatURL, strings.NewReader(large))
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return nil, errCallerDisk }
		resp, err = rt.RoundTrip(req)
		require.Nil(t, resp)
		assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, errCallerDisk)

		assert.Zero(t, up.count(), "nothing reached the upstream")
		assert.Equal(t, 0, c.InFlight("oai"))
	})
}

// An error response with an endless body: the transport reads at most 1 MiB of it, closes
// it, and the caller gets that much, marked not to be retried.
func TestTransportEndlessErrorBodyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			chunk := []byte(strings.Repeat(`{"error":`, 1000))
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		ct := &countingTransport{base: memTransport{up}}
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
		resp, err := post(t, context.Background(), c.Transport(ct), chatURL, chatBody)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		got, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Len(t, got, 1<<20)
		assert.Equal(t, int64(len(got)), resp.ContentLength)
		assert.Equal(t, 2, up.count())
		assert.Equal(t, ct.opened.Load(), ct.closed.Load(), "every upstream body is closed")
		assert.Equal(t, 0, c.InFlight("oai"))
	})
}
