package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
)

// EmbedWire is a vendor's embeddings wire format (Target.Embed). Failures are rendered by
// the target's Wire.Render, since vendors answer embedding and chat requests with the same
// error responses. Implementations must be safe for concurrent use.
type EmbedWire interface {
	// DecodeEmbed reads an embedding request the adapter sent (its body already read) and
	// reports what it carried; it returns an error when the request is not in the
	// vendor's documented shape (method, path, credential header, body).
	DecodeEmbed(r *http.Request, body []byte) (*EmbedSeen, error)
	// RenderEmbed returns the vendor's successful response carrying r's vectors and usage
	// for a request like req.
	RenderEmbed(r *EmbedReply, req *EmbedSeen) (*WireResponse, error)
}

// EmbedSeen is what an upstream understood of one embedding request.
type EmbedSeen struct {
	Model  string
	APIKey string
	// Inputs are the texts to embed, in order.
	Inputs []string
	// Dimensions is the vector length asked for; 0 for none.
	Dimensions int
}

// EmbedReply is one upstream answer to an embedding request, vendor-neutral.
type EmbedReply struct {
	// Fail, when set, makes the upstream answer with this error response instead.
	Fail *Failure
	// Vectors are the embeddings, in input order.
	Vectors [][]float32
	// InputTokens is the usage reported; 0 for none.
	InputTokens int
}

// EmbedScenario is one row of the embeddings table.
type EmbedScenario struct {
	Name    string
	Request llmclient.EmbedRequest
	Reply   EmbedReply
	// Class is the failure class a Fail reply must give; ClassNone for success, which
	// must return Reply's vectors and usage.
	Class llmclient.Class
}

// EmbedScenarios returns the embeddings table, a fresh copy on each call:
// embed/one, embed/batch, embed/dimensions, and embed/error/<kind> for the failure kinds
// an embedding call can meet (rate limits with a header or a body hint, quota, overload,
// server error, bad request, auth, permission, not found).
func EmbedScenarios() []EmbedScenario {
	vec := func(n, dims int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = make([]float32, dims)
			for j := range out[i] {
				out[i][j] = float32(i+1) / float32(j+2)
			}
		}
		return out
	}
	out := []EmbedScenario{
		{Name: "embed/one", Request: llmclient.EmbedRequest{Model: Model, Input: []string{"What is a quaternion?"}},
			Reply: EmbedReply{Vectors: vec(1, 5), InputTokens: 6}},
		{Name: "embed/batch", Request: llmclient.EmbedRequest{Model: Model, Input: []string{"first", "second", "third"}},
			Reply: EmbedReply{Vectors: vec(3, 4), InputTokens: 3}},
		{Name: "embed/dimensions", Request: llmclient.EmbedRequest{Model: Model, Input: []string{"a", "b"}, Dimensions: 2, TaskType: "RETRIEVAL_DOCUMENT"},
			Reply: EmbedReply{Vectors: vec(2, 2)}},
	}
	for _, k := range []Kind{KindRateLimited, KindRateLimitedBodyHint, KindQuota429, KindOverloaded, KindServerError,
		KindBadRequest, KindAuth, KindPermission, KindNotFound} {
		f := Failure{Kind: k}
		switch k {
		case KindRateLimited:
			f.RetryAfter = 2e9
		case KindRateLimitedBodyHint:
			f.RetryAfter = 15e8
		}
		out = append(out, EmbedScenario{Name: "embed/error/" + string(k), Request: llmclient.EmbedRequest{Model: Model, Input: []string{"x"}},
			Reply: EmbedReply{Fail: &f}, Class: k.Class()})
	}
	return out
}

// RunEmbed runs every scenario of EmbedScenarios against target, whose Embed must be set
// and whose Provider must implement llmclient.Embedder, as subtests "<scenario>/provider"
// (in memory) and "<scenario>/loopback_provider" (over a server on 127.0.0.1). Each case
// checks what the upstream received (model, credential, inputs in order, dimensions), the
// vectors and usage returned or the error's class, status and Retry-After, that no error
// text holds the API key, and that every response body was closed.
func RunEmbed(t *testing.T, target Target) {
	t.Helper()
	if err := target.validate(); err != nil {
		t.Fatal(err)
	}
	if target.Wire == nil || target.Embed == nil {
		t.Fatalf("conformance: RunEmbed needs a target with Wire and Embed; %q has none", target.Name)
	}
	for _, sc := range EmbedScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			for _, loopback := range []bool{false, true} {
				mode := ModeProvider
				if loopback {
					mode = ModeLoopbackProvider
				}
				t.Run(mode, func(t *testing.T) {
					probs, skip := runEmbed(&target, &sc, loopback)
					if skip != "" {
						t.Skipf("not applicable to %s: %s", target.Name, skip)
					}
					for _, p := range probs {
						t.Error(p)
					}
				})
			}
		})
	}
}

func runEmbed(tg *Target, sc *EmbedScenario, loopback bool) (probs []string, skip string) {
	var p problems
	var mu sync.Mutex
	var seen []*EmbedSeen
	var status int
	respond := func(r *http.Request) *WireResponse {
		mu.Lock()
		defer mu.Unlock()
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
		if err != nil {
			p.add("reading the request body: %v", err)
		}
		s, err := tg.Embed.DecodeEmbed(r, body)
		if err != nil {
			p.add("request not in the vendor's format: %v", err)
			return harnessError("undecodable request")
		}
		seen = append(seen, s)
		var wr *WireResponse
		if sc.Reply.Fail != nil {
			wr, err = tg.Wire.Render(&Reply{Fail: sc.Reply.Fail}, &Seen{Model: s.Model, APIKey: s.APIKey})
		} else {
			wr, err = tg.Embed.RenderEmbed(&sc.Reply, s)
		}
		if errors.Is(err, ErrNotApplicable) {
			skip = strings.TrimPrefix(err.Error(), ErrNotApplicable.Error()+": ")
			return harnessError("not applicable")
		}
		if err != nil || wr == nil {
			p.add("rendering the reply: %v", err)
			return harnessError("render failed")
		}
		status = wr.Status
		return wr
	}
	up := newUpstream(tg, false, nil)
	up.custom = respond
	var hc *http.Client
	base := memBaseURL
	if loopback {
		srv := httptest.NewServer(up.handler())
		defer srv.Close()
		base = srv.URL
		hc = &http.Client{Transport: &tracker{base: srv.Client().Transport, up: up}}
	} else {
		hc = &http.Client{Transport: &tracker{base: memTransport{up: up}, up: up}}
	}
	prov, err := tg.Wire.NewProvider(base, hc, apiKey)
	if err != nil {
		return []string{"building the adapter: " + err.Error()}, ""
	}
	e, ok := prov.(llmclient.Embedder)
	if !ok {
		return []string{"the Provider does not implement llmclient.Embedder"}, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := sc.Request
	req.Input = slices.Clone(sc.Request.Input)
	resp, err := e.Embed(ctx, &llmclient.EmbedCall{Request: &req, Model: req.Model})
	mu.Lock()
	defer mu.Unlock()
	if skip != "" {
		return nil, skip
	}
	if len(seen) != 1 {
		p.add("upstream received %d calls, want 1", len(seen))
	} else {
		s := seen[0]
		if s.Model != req.Model || s.APIKey != apiKey || !slices.Equal(s.Inputs, req.Input) || s.Dimensions != req.Dimensions {
			p.add("upstream saw model %q, key %q, inputs %q, dimensions %d; want %q, the configured key, %q, %d",
				s.Model, redactKey(s.APIKey, apiKey), s.Inputs, s.Dimensions, req.Model, req.Input, req.Dimensions)
		}
	}
	if sc.Class == llmclient.ClassNone {
		checkEmbedResponse(&p, sc, resp, err)
	} else {
		checkEmbedError(&p, sc, status, err)
	}
	p = append(p, leaks(err, apiKey)...)
	return append(p, up.report(true)...), ""
}

func checkEmbedResponse(p *problems, sc *EmbedScenario, resp *llmclient.EmbedResponse, err error) {
	if err != nil || resp == nil {
		p.add("unexpected error (class %s): %v", llmclient.ClassOf(err), err)
		return
	}
	if len(resp.Vectors) != len(sc.Reply.Vectors) {
		p.add("%d vectors, want %d", len(resp.Vectors), len(sc.Reply.Vectors))
		return
	}
	for i := range resp.Vectors {
		if !slices.Equal(resp.Vectors[i], sc.Reply.Vectors[i]) {
			p.add("vector %d = %v, want %v", i, resp.Vectors[i], sc.Reply.Vectors[i])
		}
	}
	if resp.Usage.InputTokens != sc.Reply.InputTokens || resp.Usage.OutputTokens != 0 {
		p.add("Usage = %+v, want %d input tokens", resp.Usage, sc.Reply.InputTokens)
	}
	if resp.Model == "" {
		p.add("Model is empty")
	}
}

func checkEmbedError(p *problems, sc *EmbedScenario, status int, err error) {
	var e *llmclient.Error
	if !errors.As(err, &e) {
		p.add("error is %T (%v), want an *llmclient.Error of class %s", err, err, sc.Class)
		return
	}
	if e.Class != sc.Class {
		p.add("Error.Class = %s, want %s; error: %v", e.Class, sc.Class, err)
	}
	if e.Status != status {
		p.add("Error.Status = %d, want %d", e.Status, status)
	}
	if e.RetryAfter != sc.Reply.Fail.RetryAfter {
		p.add("Error.RetryAfter = %v, want %v", e.RetryAfter, sc.Reply.Fail.RetryAfter)
	}
	if e.Model == "" {
		p.add("Error.Model is empty: %s", fmt.Sprint(err))
	}
}
