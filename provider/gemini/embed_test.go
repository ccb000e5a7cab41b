package gemini_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

func embedCall(model string, inputs ...string) *llmclient.EmbedCall {
	return &llmclient.EmbedCall{Model: model, Request: &llmclient.EmbedRequest{Model: model, Input: inputs}}
}

func TestEmbedOne(t *testing.T) {
	p, rec := serve(t, providertest.Fixed(http.StatusOK, `{"embedding":{"values":[0.25,-0.5,1]},"usageMetadata":{"promptTokenCount":4}}`))
	call := embedCall("gemini-embedding-001", "What is the meaning of life?")
	call.Request.TaskType, call.Request.Dimensions = "RETRIEVAL_QUERY", 3
	resp, err := p.Embed(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Vectors) != 1 || resp.Vectors[0][1] != -0.5 || resp.Usage != (llmclient.Usage{InputTokens: 4, TotalTokens: 4}) || resp.Model != "gemini-embedding-001" {
		t.Errorf("response %+v", resp)
	}
	got := rec.Last(t)
	if got.Path != "/v1beta/models/gemini-embedding-001:embedContent" || got.Header.Get("X-Goog-Api-Key") != testKey {
		t.Errorf("request %s %v", got.Path, got.Header)
	}
	providertest.Golden(t, "embed_one.json", got.Body, *update)
}

func TestEmbedBatch(t *testing.T) {
	p, rec := serve(t, providertest.Fixed(http.StatusOK, `{"embeddings":[{"values":[1,0]},{"values":[0,1]}]}`))
	call := embedCall("models/gemini-embedding-001", "first", "second")
	call.Request.TaskType = "RETRIEVAL_DOCUMENT"
	resp, err := p.Embed(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Vectors) != 2 || resp.Vectors[1][1] != 1 || resp.Usage != (llmclient.Usage{}) {
		t.Errorf("response %+v", resp)
	}
	got := rec.Last(t)
	if got.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" {
		t.Errorf("path %s", got.Path)
	}
	providertest.Golden(t, "batch_embed_two.json", got.Body, *update)
	if p.MaxEmbedBatch() != gemini.DefaultMaxEmbedBatch {
		t.Errorf("MaxEmbedBatch = %d", p.MaxEmbedBatch())
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
		{name: "no model", call: embedCall("", "a"), class: failure.BadRequest, msg: "no model"},
		{name: "too many", call: embedCall("m", make([]string, gemini.DefaultMaxEmbedBatch+1)...), class: failure.BadRequest, msg: "more than MaxEmbedBatch"},
		{name: "negative dimensions", call: func() *llmclient.EmbedCall { c := embedCall("m", "a"); c.Request.Dimensions = -3; return c }(), class: failure.BadRequest, msg: "negative"},
		{name: "huge dimensions", call: func() *llmclient.EmbedCall { c := embedCall("m", "a"); c.Request.Dimensions = math.MaxInt; return c }(), class: failure.BadRequest, msg: "int32"},
		{name: "quota", status: 429, body: `{"error":{"code":429,"message":"You exceeded your current quota. key ` + testKey + `","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`,
			call: embedCall("m", "a"), class: failure.RateLimited, sent: true},
		{name: "wrong count", status: 200, body: `{"embeddings":[{"values":[1]}]}`, call: embedCall("m", "a", "b"), class: failure.ServerError, msg: "1 vectors for 2 inputs", sent: true},
		{name: "mixed lengths", status: 200, body: `{"embeddings":[{"values":[1]},{"values":[1,2]}]}`, call: embedCall("m", "a", "b"), class: failure.ServerError, msg: "mixes", sent: true},
		{name: "garbage", status: 200, body: `{"embedding":{"values":"x"}}`, call: embedCall("m", "a"), class: failure.ServerError, msg: "malformed", sent: true},
		{name: "in-band error", status: 200, body: `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, call: embedCall("m", "a"), class: failure.Overloaded, sent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.status
			if st == 0 {
				st = 200
			}
			p, rec := serve(t, providertest.Fixed(st, tt.body))
			_, err := p.Embed(context.Background(), tt.call)
			e := providertest.AsError(t, err)
			if e.Class != tt.class || !strings.Contains(e.Error(), tt.msg) || strings.Contains(e.Error(), testKey) {
				t.Errorf("error %v (class %v), want %v with %q", e, e.Class, tt.class, tt.msg)
			}
			if (rec.Len() > 0) != tt.sent {
				t.Errorf("%d requests sent", rec.Len())
			}
		})
	}
	v, err := gemini.New(gemini.WithVertex("p", "us-central1"), gemini.WithAPIKey("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Embed(context.Background(), embedCall("m", "a")); llmclient.ClassOf(err) != failure.BadRequest || !strings.Contains(err.Error(), "unsupported") {
		t.Errorf("Vertex embed: %v", err)
	}
	noKey, _ := gemini.New()
	if _, err := noKey.Embed(context.Background(), embedCall("m", "a")); llmclient.ClassOf(err) != failure.Auth {
		t.Errorf("no key: %v", err)
	}
	for _, n := range []int{0, -1, 1001, math.MaxInt} {
		if _, err := gemini.New(gemini.WithMaxEmbedBatch(n)); err == nil {
			t.Errorf("WithMaxEmbedBatch(%d) accepted", n)
		}
	}
}
