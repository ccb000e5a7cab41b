package fake_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

func embedCall(inputs ...string) *llmclient.EmbedCall {
	return &llmclient.EmbedCall{Model: "emb", APIKey: "k1", Request: &llmclient.EmbedRequest{Model: "emb", Input: inputs}}
}

func TestEmbedDeterministic(t *testing.T) {
	p := fake.New(fake.Embedding(8).Forever())
	a, err := p.Embed(context.Background(), embedCall("cat", "dog"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Embed(context.Background(), embedCall("dog"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Vectors) != 2 || len(a.Vectors[0]) != 8 || a.Model != "emb" {
		t.Fatalf("response %+v", a)
	}
	if !sameVector(a.Vectors[1], b.Vectors[0]) || sameVector(a.Vectors[0], a.Vectors[1]) {
		t.Error("the same text must get the same vector and different texts different ones")
	}
	if !sameVector(a.Vectors[0], fake.Vector("cat", 8)) {
		t.Error("Vector does not match what the step returned")
	}
	var norm float64
	for _, x := range a.Vectors[0] {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("vector norm² = %v, want 1", norm)
	}
	if a.Usage.InputTokens != 2 || a.Usage.TotalTokens != 2 || a.Usage.OutputTokens != 0 {
		t.Errorf("usage %+v", a.Usage)
	}
	c := embedCall("cat")
	c.Request.Dimensions = 3
	if r, _ := p.Embed(context.Background(), c); len(r.Vectors[0]) != 3 {
		t.Errorf("Dimensions ignored: %d", len(r.Vectors[0]))
	}
	c.Request.Dimensions = math.MaxInt
	if r, _ := p.Embed(context.Background(), c); len(r.Vectors[0]) != fake.MaxDimensions {
		t.Errorf("huge Dimensions: %d", len(r.Vectors[0]))
	}
	if v := fake.Vector("x", -5); len(v) != 1 || v[0] != 1 && v[0] != -1 {
		t.Errorf("Vector(-5) = %v", v)
	}
	if n := len(fake.Vector("x", math.MaxInt)); n != fake.MaxDimensions {
		t.Errorf("Vector(MaxInt) has %d dimensions", n)
	}
	recs := p.Requests()
	if len(recs) != 4 || recs[0].Embed == nil || recs[0].Embed.Input[1] != "dog" || recs[0].APIKey != "k1" || recs[0].Request != nil {
		t.Errorf("records %+v", recs)
	}
}

func TestEmbedScript(t *testing.T) {
	p := fake.New(
		fake.Fail(429).RetryAfter(time.Second),
		fake.Embedding(2).Vectors([]float32{1, 0}).Usage(7),
		fake.Reply("not an embedding"),
	)
	_, err := p.Embed(context.Background(), embedCall("a"))
	var e *llmclient.Error
	if !errors.As(err, &e) || e.Class != failure.RateLimited || e.RetryAfter != time.Second {
		t.Fatalf("err = %v", err)
	}
	r, err := p.Embed(context.Background(), embedCall("a", "b"))
	if err != nil || len(r.Vectors) != 1 || r.Usage.InputTokens != 7 {
		t.Fatalf("fixed vectors: %+v, %v", r, err)
	}
	if _, err := p.Embed(context.Background(), embedCall("a")); err == nil || !errors.As(err, &e) || e.Class != failure.Unknown {
		t.Errorf("a Reply step answered Embed: %v", err)
	}
	if _, err := p.Embed(context.Background(), embedCall("a")); !errors.Is(err, fake.ErrExhausted) {
		t.Errorf("past the script: %v", err)
	}
	if _, err := fake.New(fake.Embedding(2)).Complete(context.Background(), &llmclient.Call{Request: &llmclient.Request{}}); err == nil {
		t.Error("an Embedding step answered Complete")
	}
	if _, err := p.Embed(context.Background(), nil); err == nil {
		t.Error("nil call accepted")
	}
}

func TestEmbedLatencyAndBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Embedding(4).Latency(5 * time.Second))
		start := time.Now()
		if _, err := p.Embed(context.Background(), embedCall("x")); err != nil || time.Since(start) != 5*time.Second {
			t.Errorf("latency: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p = fake.New(fake.Embedding(4).Latency(5 * time.Second))
		if _, err := p.Embed(ctx, embedCall("x")); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("deadline: %v", err)
		}
	})
	p := fake.New()
	if p.MaxEmbedBatch() != fake.DefaultMaxEmbedBatch {
		t.Errorf("default batch %d", p.MaxEmbedBatch())
	}
	p.SetMaxEmbedBatch(3)
	if p.MaxEmbedBatch() != 3 {
		t.Errorf("batch %d", p.MaxEmbedBatch())
	}
	p.SetMaxEmbedBatch(-1)
	if p.MaxEmbedBatch() != fake.DefaultMaxEmbedBatch {
		t.Errorf("reset batch %d", p.MaxEmbedBatch())
	}
}

func sameVector(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
