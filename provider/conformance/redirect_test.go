package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
)

// headerLog records the credential headers of the requests a server receives.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *headerLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			l.seen = append(l.seen, h+": "+v)
		}
	}
}

func (l *headerLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// TestRedirectKeepsCredentials checks that no adapter sends its credential to another
// host when the upstream answers with a redirect (net/http forwards custom headers such as
// x-api-key to any host): the redirect is not followed and the call fails with the 3xx
// status. A redirect to the same host is still followed.
func TestRedirectKeepsCredentials(t *testing.T) {
	const key = "sk-test-redirect-0123456789"
	var elsewhere, moved headerLog
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.add(r)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer other.Close()
	// localhost and 127.0.0.1 are the same machine but different hosts to net/http.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/moved"):
			moved.add(r)
			w.WriteHeader(http.StatusInternalServerError)
		case r.Header.Get("X-Same-Host") != "":
			http.Redirect(w, r, r.URL.Path+"/moved", http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}))
	defer upstream.Close()
	providers := map[string]func(base string) (llmclient.Provider, error){
		"openai": func(base string) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL(base+"/v1"), openai.WithAPIKey(key))
		},
		"azure": func(base string) (llmclient.Provider, error) {
			return openai.New(openai.WithAzure(base, "2024-10-21"), openai.WithAPIKey(key))
		},
		"anthropic": func(base string) (llmclient.Provider, error) {
			return anthropic.New(anthropic.WithBaseURL(base), anthropic.WithAPIKey(key), anthropic.WithHTTPClient(&http.Client{}))
		},
		"gemini": func(base string) (llmclient.Provider, error) {
			return gemini.New(gemini.WithBaseURL(base), gemini.WithAPIKey(key))
		},
	}
	for name, mk := range providers {
		t.Run(name, func(t *testing.T) {
			before := len(elsewhere.all())
			p, err := mk(upstream.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), helloCall())
			var e *llmclient.Error
			if !errors.As(err, &e) || e.Status != http.StatusTemporaryRedirect {
				t.Errorf("Complete = %v, want an error with status 307", err)
			}
			st, err := p.Stream(context.Background(), helloCall())
			if err == nil {
				st.Close()
				t.Error("Stream followed the redirect to another host")
			}
			if seen := elsewhere.all()[before:]; len(seen) > 0 {
				t.Fatalf("the other host received %q", seen)
			}
		})
	}
	// A redirect to the same host is followed, with the credential.
	p, err := anthropic.New(anthropic.WithBaseURL(upstream.URL), anthropic.WithAPIKey(key), anthropic.WithHeader("X-Same-Host", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), helloCall()); llmclient.ClassOf(err) != failure.ServerError {
		t.Errorf("Complete = %v, want the 500 of the moved endpoint", err)
	}
	if seen := moved.all(); len(seen) != 1 || seen[0] != "X-Api-Key: "+key {
		t.Errorf("the moved endpoint received %q", seen)
	}
}
