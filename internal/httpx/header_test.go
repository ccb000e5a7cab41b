package httpx_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/internal/httpx"
)

func TestValidHeader(t *testing.T) {
	names := map[string]bool{
		"X-Api-Key": true, "anthropic-beta": true, "X_Odd.Name~1": true,
		"": false, "bad header": false, "a:b": false, "é": false, "x\x7f": false, "(x)": false,
	}
	for k, want := range names {
		if got := httpx.ValidHeaderName(k); got != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", k, got, want)
		}
	}
	values := map[string]bool{
		"": true, "sk-ant-123": true, "a\tb": true, "ünïcode": true,
		"a\nb": false, "a\rb": false, "\x00": false, "x\x7f": false,
	}
	for v, want := range values {
		if got := httpx.ValidHeaderValue(v); got != want {
			t.Errorf("ValidHeaderValue(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestCheckHeader(t *testing.T) {
	if err := httpx.CheckHeader(nil); err != nil {
		t.Errorf("nil header: %v", err)
	}
	if err := httpx.CheckHeader(http.Header{"Anthropic-Beta": {"x"}}); err != nil {
		t.Errorf("valid header: %v", err)
	}
	for _, tt := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"Bad Name": {"x"}}, `WithHeader: invalid header name "Bad Name"`},
		{http.Header{"X-Ok": {"secret\nvalue"}}, `WithHeader: invalid value for header "X-Ok"`},
	} {
		err := httpx.CheckHeader(tt.h)
		if err == nil || err.Error() != tt.want {
			t.Errorf("CheckHeader(%v) = %v, want %q", tt.h, err, tt.want)
		}
	}
	if err := httpx.CheckAPIKey("sk-1"); err != nil {
		t.Errorf("valid key: %v", err)
	}
	if err := httpx.CheckAPIKey("sk-secret\r\n"); err == nil || strings.Contains(err.Error(), "secret") || !strings.HasPrefix(err.Error(), "WithAPIKey: ") {
		t.Errorf("CheckAPIKey = %v", err)
	}
}

func TestCheckBaseURL(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want string // error, or "" for none
	}{
		{"https://api.anthropic.com", ""},
		{"http://127.0.0.1:8080/proxy/", ""},
		{"api.anthropic.com", "base URL: want an absolute http or https URL"},
		{"ftp://x.example", "base URL: want an absolute http or https URL"},
		{"https://", "base URL: want an absolute http or https URL"},
		{"://bad", "base URL: want an absolute http or https URL"},
		{"https://x.example/?key=secret", "base URL: must not contain a query, fragment or user info"},
		{"https://x.example/#secret", "base URL: must not contain a query, fragment or user info"},
		{"https://user:secret@x.example", "base URL: must not contain a query, fragment or user info"},
	} {
		err := httpx.CheckBaseURL(tt.url)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckBaseURL(%q) = %v", tt.url, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("CheckBaseURL(%q) = %v, want %q", tt.url, err, tt.want)
		}
	}
}

func TestNewPost(t *testing.T) {
	static := http.Header{"Anthropic-Beta": {"b1"}, "Content-Type": {"text/plain"}, "Accept": {"*/*"}}
	for _, stream := range []bool{false, true} {
		req, err := httpx.NewPost(context.Background(), "http://127.0.0.1:1/v1/x", []byte(`{"a":1}`), static, stream)
		if err != nil {
			t.Fatal(err)
		}
		wantAccept := "application/json"
		if stream {
			wantAccept = "text/event-stream"
		}
		for k, want := range map[string]string{
			"Anthropic-Beta": "b1", "Content-Type": "application/json", "Accept": wantAccept, "User-Agent": httpx.UserAgent,
		} {
			if got := req.Header.Get(k); got != want {
				t.Errorf("stream %v: %s = %q, want %q", stream, k, got, want)
			}
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || string(body) != `{"a":1}` || req.ContentLength != 7 || req.GetBody == nil {
			t.Errorf("request %s, body %q, length %d", req.Method, body, req.ContentLength)
		}
	}
	if static.Get("Content-Type") != "text/plain" {
		t.Error("NewPost modified the static header")
	}
	req, err := httpx.NewPost(context.Background(), "http://x", nil, http.Header{"User-Agent": {"mine/1"}}, false)
	if err != nil || req.Header.Get("User-Agent") != "mine/1" {
		t.Errorf("User-Agent override: %v, %v", req, err)
	}
	if _, err := httpx.NewPost(context.Background(), "http://x y/\x00", nil, nil, false); err == nil {
		t.Error("bad URL accepted")
	}
}
