package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/gemini"
)

// Gemini API payloads in the documented shapes (google.rpc.Status errors).
const (
	gemini503 = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	geminiOK  = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"totalTokenCount":6},"modelVersion":"gemini-2.5-flash"}`
)

// newGeminiClient returns an llmclient.Client with one Gemini upstream at base.
func newGeminiClient(t *testing.T, base string, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	p, err := gemini.New(gemini.WithBaseURL(base), gemini.WithAPIKey("gm-test-key"))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]llmclient.Option{
		llmclient.WithUpstream(llmclient.Upstream{Name: "gemini", Provider: p}),
		llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond),
	}, opts...)
	c, err := llmclient.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newGenai returns a genai client that sends through rt to base, with its own retries
// switched on: attempts tries in all, a few milliseconds apart.
func newGenai(t *testing.T, base string, rt http.RoundTripper, attempts int32) *genai.Client {
	t.Helper()
	initial, maxDelay, jitter := 0.002, 0.005, 0.0
	gc, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:     "gm-test-key",
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: &http.Client{Transport: rt},
		HTTPOptions: genai.HTTPOptions{BaseURL: base, RetryOptions: &genai.HTTPRetryOptions{
			Attempts: &attempts, InitialDelay: &initial, MaxDelay: &maxDelay, Jitter: &jitter}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gc
}

// TestGenaiRetryOptionsNeverExceedTheConfiguredAttempts switches genai's own retries on
// (it sends no retry header) against a Gemini server that always answers 503: the
// upstream sees the Client's configured attempts, however many genai makes, for
// generateContent and embedContent alike. With repeat detection off it would see their
// product.
func TestGenaiRetryOptionsNeverExceedTheConfiguredAttempts(t *testing.T) {
	calls := map[string]func(context.Context, *genai.Client) error{
		"generateContent": func(ctx context.Context, gc *genai.Client) error {
			_, err := gc.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("Say hello."), nil)
			return err
		},
		"embedContent": func(ctx context.Context, gc *genai.Client) error {
			_, err := gc.Models.EmbedContent(ctx, "gemini-embedding-001", genai.Text("Say hello."), nil)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, sdkAttempts := range []int32{2, 5, 8} {
				up := newUpstream(t, reply(503, gemini503))
				base := newCounting(t)
				c := newGeminiClient(t, up.URL, llmclient.WithMaxAttempts(3))
				gc := newGenai(t, up.URL, c.Transport(base), sdkAttempts)

				err := call(context.Background(), gc)
				require.Error(t, err)
				assert.Equal(t, 3, up.count(), "genai with %d attempts: 3 upstream calls, the Client's cap", sdkAttempts)
				var apiErr genai.APIError
				require.True(t, errors.As(err, &apiErr), "genai reports the upstream's answer: %v", err)
				assert.Equal(t, 503, apiErr.Code)
				assert.Equal(t, "UNAVAILABLE", apiErr.Status)
				assert.True(t, base.allClosed())
			}

			// The control: without repeat detection, genai's tries multiply the Client's.
			up := newUpstream(t, reply(503, gemini503))
			c := newGeminiClient(t, up.URL, llmclient.WithMaxAttempts(3))
			gc := newGenai(t, up.URL, c.Transport(newCounting(t), llmclient.WithRepeatWindow(0)), 3)
			require.Error(t, call(context.Background(), gc))
			assert.Equal(t, 9, up.count(), "3 attempts for each of genai's 3 tries")
		})
	}
}

// TestGenaiRetryAfterRecovery: a 503 the Client's retries absorb is invisible to genai,
// and the same request sent again after a success is a new call.
func TestGenaiRetryAfterRecovery(t *testing.T) {
	up := newUpstream(t, reply(503, gemini503), reply(200, geminiOK), reply(200, geminiOK))
	c := newGeminiClient(t, up.URL, llmclient.WithMaxAttempts(3))
	gc := newGenai(t, up.URL, c.Transport(newCounting(t)), 5)
	for range 2 {
		resp, err := gc.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("Say hello."), nil)
		require.NoError(t, err)
		assert.Equal(t, "Hello!", resp.Text())
	}
	assert.Equal(t, 3, up.count(), "a retried 503 and a success, then a success")
}
