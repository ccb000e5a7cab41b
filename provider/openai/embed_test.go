package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// embedOK is a CreateEmbeddingResponse in the documented shape, data out of order.
const embedOK = `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5,-0.25,1]},{"object":"embedding","index":0,"embedding":[0.125,0,-1]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":9,"total_tokens":9}}`

func embedCall(model string, inputs ...string) *llmclient.EmbedCall {
	return &llmclient.EmbedCall{Model: model, Request: &llmclient.EmbedRequest{Model: model, Input: inputs}}
}

func TestEmbed(t *testing.T) {
	u := newUpstream(t, reply{Body: embedOK})
	p := newProvider(t, u, openai.WithAPIKey("sk-emb"))
	call := embedCall("text-embedding-3-small", "The quick brown fox", "jumps over the lazy dog")
	call.Request.Dimensions = 3
	call.Request.TaskType = "RETRIEVAL_QUERY" // ignored by OpenAI
	call.Request.Extra = map[string]any{"user": "u-1"}
	resp, err := p.Embed(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Vectors) != 2 || resp.Vectors[0][0] != 0.125 || resp.Vectors[1][0] != 0.5 || resp.Model != "text-embedding-3-small" ||
		resp.Usage != (llmclient.Usage{InputTokens: 9, TotalTokens: 9}) {
		t.Errorf("response %+v", resp)
	}
	got := u.Last(t)
	if got.Path != "/v1/embeddings" || got.Header.Get("Authorization") != "Bearer sk-emb" {
		t.Errorf("request %s %v", got.Path, got.Header)
	}
	providertest.Golden(t, "embeddings_dimensions.json", got.Body, *update)
	if p.MaxEmbedBatch() != openai.DefaultMaxEmbedBatch {
		t.Errorf("MaxEmbedBatch = %d", p.MaxEmbedBatch())
	}
}

func TestEmbedBase64AndAzure(t *testing.T) {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(-2))
	body := `{"data":[{"index":0,"embedding":"` + base64.StdEncoding.EncodeToString(b) + `"}],"model":"m","usage":{"prompt_tokens":2}}`
	u := newUpstream(t, reply{Body: body})
	p := newProvider(t, u)
	call := embedCall("m", "x")
	call.Request.Extra = map[string]any{"encoding_format": "base64"}
	resp, err := p.Embed(context.Background(), call)
	if err != nil || len(resp.Vectors[0]) != 2 || resp.Vectors[0][0] != 1.5 || resp.Vectors[0][1] != -2 || resp.Usage.TotalTokens != 2 {
		t.Fatalf("base64: %+v, %v", resp, err)
	}
	var seen *http.Request
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: ioNop(embedOK), Request: r}, nil
	})}
	az, err := openai.New(openai.WithHTTPClient(client), openai.WithAzure("https://res.openai.azure.com", "2024-10-21"), openai.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := az.Embed(context.Background(), embedCall("emb-deploy", "a", "b")); err != nil {
		t.Fatal(err)
	}
	if seen.URL.String() != "https://res.openai.azure.com/openai/deployments/emb-deploy/embeddings?api-version=2024-10-21" || seen.Header.Get("Api-Key") != "k" {
		t.Errorf("Azure request %s %v", seen.URL, seen.Header)
	}
}

func TestEmbedErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		call   *llmclient.EmbedCall
		class  failure.Class
		msg    string
		sent   bool
	}{
		{name: "no input", call: embedCall("m"), class: failure.BadRequest, msg: "no input"},
		{name: "empty text", call: embedCall("m", "a", ""), class: failure.BadRequest, msg: "input 1 is empty"},
		{name: "too many", call: embedCall("m", make([]string, openai.DefaultMaxEmbedBatch+1)...), class: failure.BadRequest, msg: "more than MaxEmbedBatch"},
		{name: "negative dimensions", call: func() *llmclient.EmbedCall { c := embedCall("m", "a"); c.Request.Dimensions = -1; return c }(), class: failure.BadRequest, msg: "negative"},
		{name: "nil", call: &llmclient.EmbedCall{}, class: failure.BadRequest, msg: "nil"},
		{name: "rate limited", status: 429, body: `{"error":{"message":"Rate limit reached, key sk-emb-secret","type":"requests","code":"rate_limit_exceeded"}}`, call: embedCall("m", "a"), class: failure.RateLimited, sent: true},
		{name: "wrong count", status: 200, body: embedOK, call: embedCall("m", "a"), class: failure.ServerError, msg: "2 vectors for 1 inputs", sent: true},
		{name: "repeated index", status: 200, body: `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, call: embedCall("m", "a", "b"), class: failure.ServerError, msg: "repeated index", sent: true},
		{name: "mixed lengths", status: 200, body: `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[2,3]}]}`, call: embedCall("m", "a", "b"), class: failure.ServerError, msg: "mixes", sent: true},
		{name: "not numbers", status: 200, body: `{"data":[{"index":0,"embedding":["x"]}]}`, call: embedCall("m", "a"), class: failure.ServerError, msg: "not a list of numbers", sent: true},
		{name: "in-band error", status: 200, body: `{"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}`, call: embedCall("m", "a"), class: failure.Overloaded, sent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.status
			if st == 0 {
				st = 200
			}
			u := newUpstream(t, reply{Status: st, Body: tt.body})
			p := newProvider(t, u, openai.WithAPIKey("sk-emb-secret"))
			_, err := p.Embed(context.Background(), tt.call)
			e := providertest.AsError(t, err)
			if e.Class != tt.class || !strings.Contains(e.Error(), tt.msg) || strings.Contains(e.Error(), "sk-emb-secret") {
				t.Errorf("error %v (class %v), want %v with %q", e, e.Class, tt.class, tt.msg)
			}
			if (u.Len() > 0) != tt.sent {
				t.Errorf("%d requests sent", u.Len())
			}
		})
	}
	for _, n := range []int{0, -1, openai.MaxEmbeddingInputs + 1, math.MaxInt} {
		if _, err := openai.New(openai.WithMaxEmbedBatch(n)); err == nil {
			t.Errorf("WithMaxEmbedBatch(%d) accepted", n)
		}
	}
	if p, err := openai.New(openai.WithMaxEmbedBatch(openai.MaxEmbeddingInputs)); err != nil || p.MaxEmbedBatch() != openai.MaxEmbeddingInputs {
		t.Errorf("WithMaxEmbedBatch(max): %v", err)
	}
}

func ioNop(s string) *readCloser { return &readCloser{strings.NewReader(s)} }

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
