package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		opts []openai.Option
		want string // "" means valid
	}{
		{"defaults", nil, ""},
		{"nil option ignored", []openai.Option{nil}, ""},
		{"compatible base", []openai.Option{openai.WithBaseURL("http://localhost:11434/v1/")}, ""},
		{"relative base", []openai.Option{openai.WithBaseURL("/v1")}, "absolute http or https URL"},
		{"ftp base", []openai.Option{openai.WithBaseURL("ftp://x/v1")}, "absolute http or https URL"},
		{"garbage base", []openai.Option{openai.WithBaseURL("http://[::1")}, "not a URL"},
		{"query in base", []openai.Option{openai.WithBaseURL("https://x/v1?key=sk-secret")}, "must not contain a query"},
		{"user info in base", []openai.Option{openai.WithBaseURL("https://u:sk-secret@x/v1")}, "user info"},
		{"nil client", []openai.Option{openai.WithHTTPClient(nil)}, "client is nil"},
		{"azure", []openai.Option{openai.WithAzure("https://r.openai.azure.com", "2024-10-21")}, ""},
		{"azure no version", []openai.Option{openai.WithAzure("https://r.openai.azure.com", " ")}, "api version is empty"},
		{"azure bad endpoint", []openai.Option{openai.WithAzure("r.openai.azure.com", "2024-10-21")}, "WithAzure endpoint"},
		{"bad max field", []openai.Option{openai.WithMaxTokensField("max_output_tokens")}, "WithMaxTokensField"},
		{"bad header name", []openai.Option{openai.WithHeader("Bad Header", "x")}, "invalid header name"},
		{"empty header name", []openai.Option{openai.WithHeader("", "x")}, "invalid header name"},
		{"bad header value", []openai.Option{openai.WithHeader("X-A", "a\r\nb")}, "invalid value"},
		{"bad org", []openai.Option{openai.WithOrganization("org\n")}, "OpenAI-Organization"},
		{"bad key", []openai.Option{openai.WithAPIKey("sk-abc\n")}, "WithAPIKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := openai.New(tt.opts...)
			if tt.want == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "openai: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v; want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u,
		openai.WithAPIKey("sk-provider"),
		openai.WithOrganization("org-1"),
		openai.WithProject("proj_1"),
		openai.WithHeader("HTTP-Referer", "https://app.example"),
		openai.WithHeader("X-Title", "first"),
		openai.WithHeader("X-Title", "second"),
		openai.WithHeader("Content-Type", "text/plain"), // the adapter's own header wins
	)
	if _, err := p.Complete(context.Background(), simpleCall("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	r := u.Last(t)
	want := map[string]string{
		"Authorization":       "Bearer sk-provider",
		"Openai-Organization": "org-1",
		"Openai-Project":      "proj_1",
		"Http-Referer":        "https://app.example",
		"X-Title":             "second",
		"Content-Type":        "application/json",
		"Accept":              "application/json",
		"User-Agent":          "llmclient-go",
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q; want %q", k, got, v)
		}
	}
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.RawQuery != "" {
		t.Errorf("request %s %s?%s", r.Method, r.Path, r.RawQuery)
	}
	if r.Header.Get("Api-Key") != "" {
		t.Error("api-key header sent to a non-Azure upstream")
	}

	// The call's pool key wins over the provider's key.
	call := simpleCall("gpt-4o")
	call.APIKey = "sk-pool-2"
	if _, err := p.Complete(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if got := u.Last(t).Header.Get("Authorization"); got != "Bearer sk-pool-2" {
		t.Errorf("Authorization = %q; want the call's key", got)
	}
}

func TestNoKeyNoAuthHeader(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	if _, err := p.Complete(context.Background(), simpleCall("llama3")); err != nil {
		t.Fatal(err)
	}
	if h := u.Last(t).Header; h.Get("Authorization") != "" || h.Get("Api-Key") != "" {
		t.Fatalf("auth header sent without a key: %v", h)
	}
}

func TestModelFromRequestWhenCallHasNone(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	call := simpleCall("")
	call.Request.Model = "from-request"
	if _, err := p.Complete(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(u.Last(t).Body), `"model":"from-request"`) {
		t.Fatalf("body %s", u.Last(t).Body)
	}
}

func TestAzure(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p, err := openai.New(
		openai.WithAzure(u.URL+"/", "2024-10-21"),
		openai.WithAPIKey("azure-key"),
		openai.WithHTTPClient(u.Client()),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), simpleCall("my gpt4o/deploy")); err != nil {
		t.Fatal(err)
	}
	r := u.Last(t)
	if r.Path != "/openai/deployments/my gpt4o/deploy/chat/completions" || r.RawQuery != "api-version=2024-10-21" {
		t.Fatalf("Azure URL: path %q query %q", r.Path, r.RawQuery)
	}
	if r.Header.Get("Api-Key") != "azure-key" || r.Header.Get("Authorization") != "" {
		t.Fatalf("Azure auth headers: %v", r.Header)
	}
	if !strings.Contains(string(r.Body), `"model":"my gpt4o/deploy"`) {
		t.Fatalf("body %s", r.Body)
	}

	// The deployment name is path-escaped: it cannot climb out of the deployments path.
	var rawPath string
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rawPath = r.URL.EscapedPath()
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(okBody)), Request: r}, nil
	})}
	p2, err := openai.New(openai.WithAzure("https://res.openai.azure.com", "2024-10-21"), openai.WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Complete(context.Background(), simpleCall("../x?y")); err != nil {
		t.Fatal(err)
	}
	if rawPath != "/openai/deployments/..%2Fx%3Fy/chat/completions" {
		t.Fatalf("escaped path %q", rawPath)
	}

	// Azure cannot route without a deployment.
	e := providertest.CompleteError(t, p, simpleCall(""))
	if e.Class != failure.BadRequest || !strings.Contains(e.Message, "deployment") {
		t.Fatalf("empty deployment: %v", e)
	}
}

func TestNilCall(t *testing.T) {
	p, err := openai.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []*llmclient.Call{nil, {Model: "m"}} {
		if _, err := p.Complete(context.Background(), call); llmclient.ClassOf(err) != failure.BadRequest {
			t.Fatalf("Complete(%v) = %v", call, err)
		}
		if _, err := p.Stream(context.Background(), call); llmclient.ClassOf(err) != failure.BadRequest {
			t.Fatalf("Stream(%v) = %v", call, err)
		}
	}
}

func TestTransportErrors(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u, openai.WithAPIKey("sk-secret-key"))
	u.Close() // connection refused from now on
	_, err := p.Complete(context.Background(), simpleCall("gpt-4o"))
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	if c := llmclient.ClassOf(err); c != failure.Network {
		t.Fatalf("class %v for %v; want network", c, err)
	}
	if !strings.HasPrefix(err.Error(), "openai: ") || strings.Contains(err.Error(), "sk-secret-key") {
		t.Fatalf("error %q", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Complete(ctx, simpleCall("gpt-4o"))
	if !errors.Is(err, context.Canceled) || llmclient.ClassOf(err) != failure.Canceled {
		t.Fatalf("canceled call: %v", err)
	}
}

func TestTruncatedSuccessBody(t *testing.T) {
	// The server promises more bytes than it sends: a network failure, not a parse error.
	srv := newUpstream(t, reply{Header: map[string]string{"Content-Length": "500"}, Body: `{"id":"x","choices":[`})
	p := newProvider(t, srv)
	_, err := p.Complete(context.Background(), simpleCall("gpt-4o"))
	if c := llmclient.ClassOf(err); c != failure.Network {
		t.Fatalf("class %v for %v; want network", c, err)
	}
}

func TestStreamErrorStatus(t *testing.T) {
	u := newUpstream(t, reply{
		Status: 429,
		Header: map[string]string{"Retry-After-Ms": "1500", "X-Request-Id": "req_9"},
		Body:   `{"error":{"message":"Rate limit reached for gpt-4o. Please try again in 634ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
	})
	p := newProvider(t, u)
	s, err := p.Stream(context.Background(), simpleCall("gpt-4o"))
	if s != nil {
		t.Fatal("stream returned with an error status")
	}
	var e *llmclient.Error
	if !errors.As(err, &e) || e.Class != failure.RateLimited || e.Status != 429 || e.RetryAfter != 1500e6 || e.RequestID != "req_9" || e.Model != "gpt-4o" {
		t.Fatalf("Stream error = %#v", err)
	}
	if got := u.Last(t).Header.Get("Accept"); got != "text/event-stream" {
		t.Fatalf("Accept = %q", got)
	}
}

func TestStreamSuccess(t *testing.T) {
	u := newUpstream(t, reply{
		Header: map[string]string{"Content-Type": "text/event-stream"},
		Body: "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
			"data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n" +
			"data: [DONE]\n\n",
	})
	p := newProvider(t, u)
	s, err := p.Stream(context.Background(), simpleCall("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var text strings.Builder
	var usage *llmclient.Usage
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(c.Text)
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if text.String() != "Hello" || usage == nil || usage.TotalTokens != 7 {
		t.Fatalf("text %q usage %+v", text.String(), usage)
	}
}
