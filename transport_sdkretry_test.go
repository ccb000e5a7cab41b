package llmclient_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

const chatURL = "http://oai.test/v1/chat/completions"

// sdkTries plays an SDK that retries without a header: it sends the same request up to
// tries times, a second apart, while the answer is a 5xx or an error. It returns the last
// answer's status (0 for an error) and each try's.
func sdkTries(t *testing.T, rt http.RoundTripper, body string, tries int) (statuses []int, last error) {
	t.Helper()
	for range tries {
		resp, err := post(t, context.Background(), rt, chatURL, body)
		last = err
		if err != nil {
			statuses = append(statuses, 0)
		} else {
			_, _ = readBody(t, resp)
			statuses = append(statuses, resp.StatusCode)
			if resp.StatusCode < 500 {
				return statuses, nil
			}
		}
		time.Sleep(time.Second)
	}
	return statuses, last
}

func TestTransportHeaderlessRetriesShareTheCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(3),
			llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		statuses, _ := sdkTries(t, rt, chatBody, 5)
		assert.Equal(t, []int{503, 503, 503, 503, 503}, statuses, "every try gets the upstream's answer")
		assert.Equal(t, 3, up.count(), "3 upstream calls in all, not 3 × 5")
		assert.Len(t, log.kinds(event.Attempt), 3)
		calls := log.kinds(event.Call)
		require.Len(t, calls, 5, "each try is a call the observer hears of")
		for _, e := range calls[1:] {
			assert.Zero(t, e.Attempt, "the repeats made no attempt")
			assert.Equal(t, 503, e.Status)
		}

		// The answer to a repeat is the upstream's error response, marked not to retry.
		resp, err := post(t, context.Background(), rt, chatURL, chatBody)
		require.NoError(t, err)
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		body, _ := readBody(t, resp)
		assert.JSONEq(t, err503, body)
		assert.Equal(t, 3, up.count())

		// After the window, the same request is a call of its own.
		time.Sleep(66 * time.Second)
		statuses, _ = sdkTries(t, rt, chatBody, 1)
		assert.Equal(t, []int{503}, statuses)
		assert.Equal(t, 6, up.count(), "a fresh call gets the transport's retries again")
	})
}

func TestTransportHeaderlessRetryGetsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No retry on a 500 here, so each try makes one call; the caps count across tries.
		up := newScript(status(500, err503), status(500, err503), status(500, err503), ok(chatOK))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(3),
			llmclient.WithDecision(failure.ServerError, llmclient.Decision{Failover: true}))
		rt := c.Transport(memTransport{up})
		statuses, _ := sdkTries(t, rt, chatBody, 5)
		assert.Equal(t, []int{500, 500, 500, 500, 500}, statuses)
		assert.Equal(t, 3, up.count(), "the fourth try had no attempt left")

		up2 := newScript(status(500, err503), ok(chatOK), status(500, err503))
		rt = c.Transport(memTransport{up2})
		statuses, _ = sdkTries(t, rt, chatBody, 5)
		assert.Equal(t, []int{500, 200}, statuses, "the retry had attempts left and succeeded")
		statuses, _ = sdkTries(t, rt, chatBody, 1)
		assert.Equal(t, []int{500}, statuses, "a success forgets the request: the next one is sent")
		assert.Equal(t, 3, up2.count())
	})
}

func TestTransportHeaderlessRetryLeavesSpentUpstreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(status(503, err503))
		b := newScript(status(400, `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`))
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), oaiUpstream(t, "b", "http://b.test/v1"),
			llmclient.WithModelGroup("gpt-4o", "a", "b"), llmclient.WithMaxAttempts(2), llmclient.WithMaxTotalAttempts(6))
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		for range 4 {
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", chatBody)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			time.Sleep(time.Second)
		}
		assert.Equal(t, 2, a.count(), "a's two attempts were used by the first try")
		assert.Equal(t, 2, b.count(), "b got one attempt on each of two tries, then none was left")
	})
}

func TestTransportRepeatAnsweredWithTheErrorWhenTheBodyIsLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := `{"error":{"message":"` + strings.Repeat("x", 20<<10) + `","type":"server_error","code":null}}`
		up := newScript(status(503, big))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{up})
		statuses, err := sdkTries(t, rt, chatBody, 2)
		assert.Equal(t, []int{503, 0}, statuses)
		assert.ErrorIs(t, err, llmclient.ErrSDKRetry)
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(err), "the class of the remembered failure")
		assert.Equal(t, 1, up.count())
	})
}

func TestTransportRepeatMemoryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1),
			llmclient.WithDecision(failure.ServerError, llmclient.Decision{Failover: true})) // no breaker
		rt := c.Transport(memTransport{up})
		body := func(i int) string { return strings.Replace(chatBody, "one word", strconv.Itoa(i)+" words", 1) }
		for i := range 600 {
			resp, err := post(t, context.Background(), rt, chatURL, body(i))
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		require.Equal(t, 600, up.count())
		for _, i := range []int{599, 0} {
			resp, err := post(t, context.Background(), rt, chatURL, body(i))
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, 601, up.count(), "the latest failure is remembered; the oldest, past 512, is not")
	})
}

func TestTransportRepeatNeedsTheSameCredential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{up})
		for _, key := range []string{"sk-tenant-a", "sk-tenant-b", "sk-tenant-a"} {
			resp, err := post(t, context.Background(), rt, chatURL, chatBody, "Authorization", "Bearer "+key)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, 2, up.count(), "another caller's identical request is not a repeat")
	})
}

func TestTransportStainlessFirstTriesAreNotRepeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
		rt := c.Transport(memTransport{up})
		for range 2 {
			resp, err := post(t, context.Background(), rt, chatURL, chatBody, "X-Stainless-Retry-Count", "0")
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, 4, up.count(), "the SDK's header says each is a first try")
	})
}

// The Stainless retry counter at its edges: a count too large for an int is a retry all
// the same (it was taken for a first try, and sent the SDK's retry upstream again); a
// negative or unreadable one is a first try.
func TestTransportStainlessRetryCountEdges(t *testing.T) {
	tests := []struct {
		count string
		sent  bool // the request reaches the upstream
	}{
		{"0", true},
		{"1", false},
		{" 2 ", false},
		{"+3", false},
		{"9223372036854775807", false},
		{"9223372036854775808", false},
		{"99999999999999999999999999999999", false},
		{"-1", true},
		{"-99999999999999999999999999999999", true},
		{"one", true},
		{"1e3", true},
		{"NaN", true},
	}
	for _, tt := range tests {
		t.Run(tt.count, func(t *testing.T) {
			up := newScript(ok(chatOK))
			c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
			resp, err := post(t, context.Background(), c.Transport(memTransport{up}), chatURL, chatBody,
				"X-Stainless-Retry-Count", tt.count)
			if tt.sent {
				require.NoError(t, err)
				_, _ = readBody(t, resp)
				assert.Equal(t, 1, up.count())
				return
			}
			assert.ErrorIs(t, err, llmclient.ErrSDKRetry)
			assert.Nil(t, resp)
			assert.Zero(t, up.count(), "an SDK's retry never reaches the upstream")
		})
	}
}
