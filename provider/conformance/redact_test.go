package conformance_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
)

// fixedTransport answers every request with 200, contentType and body.
type fixedTransport struct{ contentType, body string }

func (f fixedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {f.contentType}},
		Body: io.NopCloser(strings.NewReader(f.body)), Request: r}, nil
}

// TestGarbageEchoingKeyIsRedacted checks that when a 2xx body or a stream event is not
// valid JSON and echoes the call's API key (a broken proxy's page, a debugging gateway),
// the error that quotes its start does not carry the key, on every dialect.
func TestGarbageEchoingKeyIsRedacted(t *testing.T) {
	const key = "sk-test-garbage-0123456789abcdef"
	for name, mk := range keyedProviders(key) {
		t.Run(name+"/complete", func(t *testing.T) {
			p, err := mk(&http.Client{Transport: fixedTransport{"application/json", "<html>bad key " + key + "</html>"}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), helloCall())
			checkRedacted(t, err, key)
		})
		t.Run(name+"/stream", func(t *testing.T) {
			st := openKeyedStream(t, mk, fixedTransport{"text/event-stream", `data: {"key":"` + key + `",` + "\n\n"})
			var err error
			for err == nil {
				_, err = st.Recv()
			}
			checkRedacted(t, err, key)
		})
	}
}

func checkRedacted(t *testing.T, err error, key string) {
	t.Helper()
	if c := llmclient.ClassOf(err); c != failure.ServerError {
		t.Errorf("err = %v (class %v), want a server_error", err, c)
	}
	if err != nil && strings.Contains(err.Error(), key[:16]) {
		t.Errorf("error carries the key: %v", err)
	}
}

// keyedProviders builds each dialect's Provider with key and the given HTTP client.
func keyedProviders(key string) map[string]func(*http.Client) (llmclient.Provider, error) {
	return map[string]func(*http.Client) (llmclient.Provider, error){
		"openai": func(c *http.Client) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL("http://127.0.0.1:1/v1"), openai.WithHTTPClient(c), openai.WithAPIKey(key))
		},
		"openai responses": func(c *http.Client) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL("http://127.0.0.1:1/v1"), openai.WithHTTPClient(c), openai.WithAPIKey(key), openai.WithResponsesAPI())
		},
		"anthropic": func(c *http.Client) (llmclient.Provider, error) {
			return anthropic.New(anthropic.WithBaseURL("http://127.0.0.1:1"), anthropic.WithHTTPClient(c), anthropic.WithAPIKey(key))
		},
		"gemini": func(c *http.Client) (llmclient.Provider, error) {
			return gemini.New(gemini.WithBaseURL("http://127.0.0.1:1"), gemini.WithHTTPClient(c), gemini.WithAPIKey(key))
		},
	}
}

// openKeyedStream opens a stream through the provider mk builds over rt; the test closes it.
func openKeyedStream(t *testing.T, mk func(*http.Client) (llmclient.Provider, error), rt http.RoundTripper) llmclient.ProviderStream {
	t.Helper()
	p, err := mk(&http.Client{Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stream(context.Background(), helloCall())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func helloCall() *llmclient.Call {
	return &llmclient.Call{Model: "m", Request: &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}}
}

// TestFormattedStreamHidesKey checks that printing a stream an adapter returned, with any
// verb, does not print the API key it keeps for redacting in-band errors.
func TestFormattedStreamHidesKey(t *testing.T) {
	const key = "sk-test-format-0123456789abcdef"
	for name, mk := range keyedProviders(key) {
		t.Run(name, func(t *testing.T) {
			st := openKeyedStream(t, mk, fixedTransport{"text/event-stream", ": hi\n\n"})
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
				if s := fmt.Sprintf(verb, st); strings.Contains(s, key[:16]) || !strings.Contains(s, "Status: 200") {
					t.Errorf("%s prints %s", verb, s)
				}
			}
		})
	}
}
