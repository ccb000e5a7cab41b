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
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
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
	// Class is the failure class a Fail reply must give; failure.None for success, which
	// must return Reply's vectors and usage.
	Class failure.Class
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
// and whose Provider must implement llmclient.Embedder, as subtests "<scenario>/<mode>":
//
//	provider            the adapter's Embed directly, in memory
//	client              llmclient.Client.Embed with WithMaxAttempts(1): the class, status
//	                    and Retry-After of each failure as it is, a usage the vendor does not
//	                    report estimated
//	client_retry        Client.Embed with the default retry policy, failure scenarios only,
//	                    with a good answer scripted after the failure: retryable classes must
//	                    be retried after their Retry-After (or a backoff) and succeed, the
//	                    others must not be retried; in a testing/synctest bubble, with a key
//	                    pool of one
//	loopback_provider,  provider and client again over a server on 127.0.0.1
//	loopback_client
//
// Each case checks what the upstream received (model, credential, inputs in order,
// dimensions), the vectors and usage returned or the error's class, status and
// Retry-After, that no error text holds the API key, and that every response body was
// closed.
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
			modes := []string{ModeProvider, ModeClient, ModeLoopbackProvider, ModeLoopbackClient}
			if sc.Class != failure.None {
				modes = append(modes, ModeClientRetry)
			}
			for _, mode := range modes {
				t.Run(mode, func(t *testing.T) {
					var probs []string
					var skip string
					if mode == ModeClientRetry {
						synctest.Test(t, func(t *testing.T) { probs, skip = runEmbed(&target, &sc, mode) })
					} else {
						probs, skip = runEmbed(&target, &sc, mode)
					}
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

// embedRecovery is the good answer scripted after a failure in ModeClientRetry.
func embedRecovery() EmbedReply {
	return EmbedReply{Vectors: [][]float32{{0.25, -0.5, 0.75}}, InputTokens: 2}
}

// embedRetryable reports whether the default decisions retry class c on a single-key
// upstream (auth and quota retry only on another key).
func embedRetryable(c failure.Class) bool {
	return llmclient.DefaultDecision(c).Retry && c != failure.Auth && c != failure.QuotaExhausted
}

func runEmbed(tg *Target, sc *EmbedScenario, mode string) (probs []string, skip string) {
	var p problems
	var mu sync.Mutex
	var seen []*EmbedSeen
	var statuses []int
	replies := []EmbedReply{sc.Reply}
	if mode == ModeClientRetry {
		replies = append(replies, embedRecovery())
	}
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
		if len(seen) > len(replies) {
			p.add("upstream received call %d; the case scripts %d", len(seen), len(replies))
			return harnessError("no reply left")
		}
		reply := &replies[len(seen)-1]
		var wr *WireResponse
		if reply.Fail != nil {
			wr, err = tg.Wire.Render(&Reply{Fail: reply.Fail}, &Seen{Model: s.Model, APIKey: s.APIKey})
		} else {
			wr, err = tg.Embed.RenderEmbed(reply, s)
		}
		if errors.Is(err, ErrNotApplicable) {
			skip = strings.TrimPrefix(err.Error(), ErrNotApplicable.Error()+": ")
			return harnessError("not applicable")
		}
		if err != nil || wr == nil {
			p.add("rendering the reply: %v", err)
			return harnessError("render failed")
		}
		statuses = append(statuses, wr.Status)
		return wr
	}
	loopback := mode == ModeLoopbackProvider || mode == ModeLoopbackClient
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
	var resp *llmclient.EmbedResponse
	name := upstreamName(tg)
	switch mode {
	case ModeProvider, ModeLoopbackProvider:
		resp, err = e.Embed(ctx, &llmclient.EmbedCall{Request: &req, Model: req.Model})
	default:
		u := llmclient.Upstream{Name: name, Provider: prov}
		opts := []llmclient.Option{llmclient.WithMaxAttempts(1)}
		if mode == ModeClientRetry {
			u.Keys, opts = []string{apiKey}, nil
		}
		c, cerr := llmclient.New(append(opts, llmclient.WithUpstream(u))...)
		if cerr != nil {
			return []string{"llmclient.New: " + cerr.Error()}, ""
		}
		resp, err = c.Embed(ctx, &req)
	}
	mu.Lock()
	defer mu.Unlock()
	if skip != "" {
		return nil, skip
	}
	calls := 1
	if mode == ModeClientRetry && embedRetryable(sc.Class) {
		calls = 2
	}
	if len(seen) != calls {
		p.add("upstream received %d calls, want %d", len(seen), calls)
	}
	for _, s := range seen {
		if s.Model != req.Model || s.APIKey != apiKey || !slices.Equal(s.Inputs, req.Input) || s.Dimensions != req.Dimensions {
			p.add("upstream saw model %q, key %q, inputs %q, dimensions %d; want %q, the configured key, %q, %d",
				s.Model, redactKey(s.APIKey, apiKey), s.Inputs, s.Dimensions, req.Model, req.Input, req.Dimensions)
		}
	}
	client := mode != ModeProvider && mode != ModeLoopbackProvider
	switch {
	case sc.Class == failure.None:
		checkEmbedResponse(&p, &sc.Reply, resp, err, client)
	case calls == 2:
		rec := embedRecovery()
		checkEmbedResponse(&p, &rec, resp, err, true)
		if resp != nil && len(resp.Attempts) == 2 {
			a := resp.Attempts[0]
			if a.Class != sc.Class || a.Status != statuses[0] || a.RetryAfter != sc.Reply.Fail.RetryAfter {
				p.add("Attempts[0] = class %s, status %d, Retry-After %v; want %s, %d, %v", a.Class, a.Status, a.RetryAfter,
					sc.Class, statuses[0], sc.Reply.Fail.RetryAfter)
			}
			w := Want{Class: sc.Class, RetryAfter: sc.Reply.Fail.RetryAfter}
			if lo, hi := retryWaitBounds(&w); resp.Attempts[1].Waited < lo || resp.Attempts[1].Waited > hi {
				p.add("the retry waited %v, want between %v and %v", resp.Attempts[1].Waited, lo, hi)
			}
		} else if resp != nil {
			p.add("%d attempts in the trace, want 2", len(resp.Attempts))
		}
	default:
		status := 0
		if len(statuses) > 0 {
			status = statuses[0]
		}
		checkEmbedError(&p, sc, status, err)
		if client {
			var ce *llmclient.Error
			if errors.As(err, &ce) && (len(ce.Attempts) != 1 || ce.Upstream != name) {
				p.add("Error has %d attempts, upstream %q; want 1, %q", len(ce.Attempts), ce.Upstream, name)
			}
		}
	}
	if client && resp != nil && resp.Upstream != name {
		p.add("Upstream = %q, want %q", resp.Upstream, name)
	}
	p = append(p, leaks(err, apiKey)...)
	return append(p, up.report(true)...), ""
}

// checkEmbedResponse checks an answer against the reply that produced it. Through a
// Client (client), a usage the reply does not report must be the Client's estimate.
func checkEmbedResponse(p *problems, want *EmbedReply, resp *llmclient.EmbedResponse, err error, client bool) {
	if err != nil || resp == nil {
		p.add("unexpected error (class %s): %v", llmclient.ClassOf(err), err)
		return
	}
	if len(resp.Vectors) != len(want.Vectors) {
		p.add("%d vectors, want %d", len(resp.Vectors), len(want.Vectors))
		return
	}
	for i := range resp.Vectors {
		if !slices.Equal(resp.Vectors[i], want.Vectors[i]) {
			p.add("vector %d = %v, want %v", i, resp.Vectors[i], want.Vectors[i])
		}
	}
	switch u := resp.Usage; {
	case u.OutputTokens != 0:
		p.add("Usage = %+v: embeddings have no output tokens", u)
	case client && want.InputTokens == 0:
		if !u.Estimated || u.InputTokens <= 0 {
			p.add("Usage = %+v, want the Client's estimate (the vendor reported none)", u)
		}
	case u.InputTokens != want.InputTokens || u.Estimated:
		p.add("Usage = %+v, want %d input tokens as reported", u, want.InputTokens)
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
