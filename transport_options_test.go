package llmclient_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithMaxReplayBody at 0 and below is clamped to 1 KiB: a body of 1 KiB (without GetBody)
// is replayed, one byte more is sent once.
func TestTransportMaxReplayBodyLowClamp(t *testing.T) {
	for _, n := range []int64{0, -1, math.MinInt64, 1} {
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				for size, calls := range map[int]int{1024: 2, 1025: 1} {
					up := newScript(status(503, err503), ok(chatOK))
					c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
					body := `{"model":"gpt-4o","x":"` + strings.Repeat("a", size-len(`{"model":"gpt-4o","x":""}`)) + `"}`
					req, err := http.NewRequest(http.MethodPost, chatURL, io.NopCloser(strings.NewReader(body)))
					require.NoError(t, err)
					req.ContentLength = int64(size)
					resp, err := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(n)).RoundTrip(req)
					require.NoError(t, err)
					_, _ = readBody(t, resp)
					assert.Equal(t, calls, up.count(), "a body of %d bytes", size)
					for _, r := range up.requests() {
						assert.Equal(t, body, r.Body)
					}
				}
			})
		})
	}
}

// WithRepeatWindow at or below 0 turns repeat detection off; above 1h it is clamped to 1h.
func TestTransportRepeatWindowEdges(t *testing.T) {
	tests := []struct {
		window time.Duration
		gap    time.Duration // between the failure and the same request again
		repeat bool
	}{
		{-1, time.Second, false},
		{math.MinInt64, time.Second, false},
		{math.MaxInt64, 59 * time.Minute, true},
		{math.MaxInt64, 61 * time.Minute, false},
		{2 * time.Hour, 61 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.window.String()+" after "+tt.gap.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(status(503, err503))
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
				rt := c.Transport(memTransport{up}, llmclient.WithRepeatWindow(tt.window))
				for i := range 2 {
					if i > 0 {
						time.Sleep(tt.gap)
					}
					resp, err := post(t, context.Background(), rt, chatURL, chatBody)
					require.NoError(t, err)
					_, _ = readBody(t, resp)
				}
				want := 4
				if tt.repeat {
					want = 2 // the repeat had nothing left
				}
				assert.Equal(t, want, up.count())
			})
		})
	}
}
