package llmclient_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lyingOnce answers chatOK; its first answer's headers report a limit of one request,
// none remaining, and a reset 10,000 hours away.
func lyingOnce() http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("x-ratelimit-limit-requests", "1")
			w.Header().Set("x-ratelimit-remaining-requests", "0")
			w.Header().Set("x-ratelimit-reset-requests", "10000h")
		}
		ok(chatOK)(w, r)
	}
}

// One answer whose rate-limit headers report a limit of one request, none remaining and
// a reset 10,000 hours away (a lying or broken upstream), then answers without headers:
// the window it teaches throttles the key to a request an hour at most, instead of
// locking it until the reset (up to 31 days were believed), and the next answer without
// headers makes the limiter forget it.
func TestLyingRateLimitHeadersThrottleAKeyForAnHourAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := lyingOnce()
		c := newClient(t, openaiOver(t, "a", h, "k1"))
		_, err := c.Complete(context.Background(), chatReq("gpt-4o"))
		require.NoError(t, err)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
			var err error
			d := elapsed(func() { _, err = c.Complete(ctx, chatReq("gpt-4o")) })
			cancel()
			require.NoError(t, err, "call %d", i+2)
			if i == 0 {
				assert.LessOrEqual(t, d, time.Hour+time.Minute, "call %d waited", i+2)
			} else {
				assert.Zero(t, d, "call %d waited: the window no answer reports any more is forgotten", i+2)
			}
		}
	})
}

// The same through the Transport.
func TestLyingRateLimitHeadersThroughTheTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := lyingOnce()
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1", "k1"))
		rt := c.Transport(memTransport{hostMux{"a.test": h}})
		for i := range 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
			var resp *http.Response
			var err error
			d := elapsed(func() { resp, err = post(t, ctx, rt, "http://a.test/v1/chat/completions", chatBody) })
			cancel()
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode, "call %d", i+1)
			switch i {
			case 1:
				assert.LessOrEqual(t, d, time.Hour+time.Minute, "call %d waited", i+1)
			default:
				assert.Zero(t, d, "call %d waited", i+1)
			}
		}
	})
}
