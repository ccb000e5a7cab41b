package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// The tests in this file prove that the suite can fail: each runs the table against a
// deliberately broken adapter and expects the harness to notice.

// fakeScript plays replies with provider/fake; mutate, when set, breaks its answers.
type fakeScript struct {
	mutate func(llmclient.Provider) llmclient.Provider
}

func (fakeScript) Render(r *Reply, _ *Seen) (int, error) {
	if r.Fail != nil {
		if r.Fail.Kind == KindBilling {
			return 402, nil
		}
		return fake.StatusForClass(r.Fail.Kind.Class()), nil
	}
	return 200, nil
}

func (s fakeScript) NewProvider(serve func(*Seen) (*Reply, error), key string) (llmclient.Provider, error) {
	p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
		seen := &Seen{Model: call.Model, APIKey: call.APIKey}
		if seen.APIKey == "" {
			seen.APIKey = key
		}
		if call.Request != nil {
			for _, t := range call.Request.Tools {
				seen.Tools = append(seen.Tools, t.Name)
			}
			for _, m := range call.Request.Messages {
				seen.ToolCalls = append(seen.ToolCalls, m.ToolCalls...)
				if m.Role == llmclient.RoleTool {
					seen.ToolResults = append(seen.ToolResults, ToolResult{Ref: m.ToolCallID, Content: m.Text()})
				}
			}
		}
		r, err := serve(seen)
		if err != nil {
			return fake.Error(err)
		}
		if f := r.Fail; f != nil {
			st, _ := s.Render(r, seen)
			return fake.FailClass(f.Kind.Class()).Status(st).RetryAfter(f.RetryAfter)
		}
		var chunks []llmclient.Chunk
		for _, t := range r.Text {
			chunks = append(chunks, llmclient.Chunk{Text: t})
		}
		if len(r.ToolCalls) > 0 {
			var c llmclient.Chunk
			for i, tc := range r.ToolCalls {
				c.ToolCalls = append(c.ToolCalls, dialect.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
			chunks = append(chunks, c)
		}
		u := r.Usage
		u.TotalTokens = u.InputTokens + u.OutputTokens
		st := fake.StreamChunks(chunks...).Finish(r.Finish).ReportUsage(u)
		switch r.End {
		case EndError:
			st.FailAfter(r.EndAfter, fake.FailClass(r.EndFail.Kind.Class()).Status(200))
		case EndCut:
			st.CutAfter(r.EndAfter)
		}
		return st
	}).Forever())
	if s.mutate != nil {
		return s.mutate(p), nil
	}
	return p, nil
}

// mutant wraps a provider and breaks what it returns.
type mutant struct {
	p      llmclient.Provider
	resp   func(*llmclient.Response)
	err    func(error) error
	chunk  func(*llmclient.Chunk)
	recvFn func(llmclient.Chunk, error) (llmclient.Chunk, error)
}

func (m *mutant) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	r, err := m.p.Complete(ctx, call)
	if err != nil && m.err != nil {
		err = m.err(err)
	}
	if r != nil && m.resp != nil {
		m.resp(r)
	}
	return r, err
}

func (m *mutant) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	s, err := m.p.Stream(ctx, call)
	if err != nil {
		if m.err != nil {
			err = m.err(err)
		}
		return nil, err
	}
	return &mutantStream{ProviderStream: s, m: m}, nil
}

type mutantStream struct {
	llmclient.ProviderStream
	m *mutant
}

func (s *mutantStream) Recv() (llmclient.Chunk, error) {
	c, err := s.ProviderStream.Recv()
	if s.m.recvFn != nil {
		return s.m.recvFn(c, err)
	}
	if err != nil && err != io.EOF && s.m.err != nil {
		err = s.m.err(err)
	}
	if err == nil && s.m.chunk != nil {
		s.m.chunk(&c)
	}
	return c, err
}

// reclass changes the class of every *llmclient.Error.
func reclass(to failure.Class) func(error) error {
	return func(err error) error {
		var e *llmclient.Error
		if errors.As(err, &e) {
			e.Class = to
		}
		return err
	}
}

func TestHarnessCatchesBrokenAdapters(t *testing.T) {
	mutants := []struct {
		name   string
		mutate func(llmclient.Provider) llmclient.Provider
		// want is a fragment of a problem the harness must report.
		want string
	}{
		{"misclassified errors", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, err: reclass(failure.BadRequest)}
		}, "class = bad_request"},
		{"Retry-After dropped", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, err: func(err error) error {
				var e *llmclient.Error
				if errors.As(err, &e) {
					e.RetryAfter = 0
				}
				return err
			}}
		}, "Error.RetryAfter = 0s, want 2s"},
		{"status dropped", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, err: func(err error) error {
				var e *llmclient.Error
				if errors.As(err, &e) {
					e.Status = 0
				}
				return err
			}}
		}, "Error.Status = 0, want 429"},
		{"key echoed", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, err: func(err error) error {
				var e *llmclient.Error
				if errors.As(err, &e) {
					e.Message += " key=" + apiKey
				}
				return err
			}}
		}, "the API key leaks into the error"},
		{"usage lost", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, resp: func(r *llmclient.Response) { r.Usage = llmclient.Usage{} },
				chunk: func(c *llmclient.Chunk) { c.Usage = nil }}
		}, "Usage = {"},
		{"tool arguments mangled", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, resp: func(r *llmclient.Response) {
				for i := range r.ToolCalls {
					r.ToolCalls[i].Arguments = `{"city":"Rome"}`
				}
			}}
		}, "ToolCalls[0].Arguments"},
		{"cut reported as a clean end", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, recvFn: func(c llmclient.Chunk, err error) (llmclient.Chunk, error) {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					return llmclient.Chunk{}, io.EOF
				}
				return c, err
			}}
		}, "call succeeded"},
		{"error event swallowed", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, recvFn: func(c llmclient.Chunk, err error) (llmclient.Chunk, error) {
				var e *llmclient.Error
				if errors.As(err, &e) {
					return llmclient.Chunk{}, io.EOF
				}
				return c, err
			}}
		}, "call succeeded"},
		{"chunk text lost", func(p llmclient.Provider) llmclient.Provider {
			return &mutant{p: p, chunk: func(c *llmclient.Chunk) {
				if c.Text == "lo" {
					c.Text = ""
				}
			}}
		}, "chunk texts"},
	}
	baseline := Target{Name: "fake", Script: fakeScript{}}
	for _, sc := range Scenarios() {
		for _, m := range []string{ModeProvider, ModeClient} {
			if probs := runMode(t, &baseline, &sc, m); len(probs) > 0 {
				t.Fatalf("baseline %s/%s fails: %q", sc.Name, m, probs)
			}
		}
	}
	for _, mt := range mutants {
		t.Run(mt.name, func(t *testing.T) {
			tg := Target{Name: "mutant", Script: fakeScript{mutate: mt.mutate}}
			var all []string
			for _, sc := range Scenarios() {
				for _, m := range []string{ModeProvider, ModeClient} {
					for _, p := range runMode(t, &tg, &sc, m) {
						all = append(all, sc.Name+"/"+m+": "+p)
					}
				}
			}
			found := false
			for _, p := range all {
				if strings.Contains(p, mt.want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("no problem mentions %q; got %d problems:\n%s", mt.want, len(all), strings.Join(all, "\n"))
			}
		})
	}
}

// TestRetryModeCatchesAWrongDecision runs client_retry with an adapter that reports a
// retryable failure as a permanent one: the Client then stops after one call.
func TestRetryModeCatchesAWrongDecision(t *testing.T) {
	tg := Target{Name: "mutant", Script: fakeScript{mutate: func(p llmclient.Provider) llmclient.Provider {
		return &mutant{p: p, err: func(err error) error {
			var e *llmclient.Error
			if errors.As(err, &e) && e.Class == failure.RateLimited {
				e.Class = failure.Permission // not retryable: must fail
			}
			return err
		}}
	}}}
	for _, sc := range Scenarios() {
		if sc.Name != "complete/error/rate_limited" {
			continue
		}
		probs := runMode(t, &tg, &sc, ModeClientRetry)
		if !strings.Contains(strings.Join(probs, "\n"), "upstream received 1 calls, want 2") {
			t.Errorf("retry mode did not catch the wrong class; problems: %q", probs)
		}
	}
}

func TestUpstreamCountsOpenBodies(t *testing.T) {
	tg := &Target{Name: "x", Wire: stubWire{}}
	up := newUpstream(tg, false, []Reply{{Text: []string{"a"}}, {Text: []string{"b"}}})
	hc := &http.Client{Transport: &tracker{base: memTransport{up: up}, up: up}}
	for i := range 2 {
		resp, err := hc.Post(memBaseURL+"/x", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			resp.Body.Close()
			resp.Body.Close() // a second Close counts once
		}
	}
	got := up.report(true)
	if len(got) != 1 || !strings.Contains(got[0], "1 response bodies left open") {
		t.Errorf("report = %q, want one body left open", got)
	}
	resp, err := hc.Post(memBaseURL+"/x", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("a call past the script got %d, want 418", resp.StatusCode)
	}
	if got := up.report(false); len(got) != 1 || !strings.Contains(got[0], "upstream received call 3; the case scripts 2") {
		t.Errorf("report = %q", got)
	}
}

// stubWire answers every reply with its text as a plain body.
type stubWire struct{}

func (stubWire) NewProvider(string, *http.Client, string) (llmclient.Provider, error) {
	return nil, errors.New("unused")
}

func (stubWire) Decode(_ *http.Request, body []byte) (*Seen, error) { return &Seen{}, nil }

func (stubWire) Render(r *Reply, _ *Seen) (*WireResponse, error) {
	return JSON(200, fmt.Sprintf("%q", strings.Join(r.Text, ""))), nil
}

func TestSSE(t *testing.T) {
	got := SSE(
		Event{Name: "message_start", Data: map[string]any{"type": "message_start"}},
		Event{},
		Event{Data: "[DONE]"},
		Event{Data: "a\nb"},
	)
	want := "event: message_start\ndata: {\"type\":\"message_start\"}\n\n: keep-alive\n\ndata: [DONE]\n\ndata: a\ndata: b\n\n"
	if string(got.Body) != want {
		t.Errorf("SSE body = %q, want %q", got.Body, want)
	}
	if got.Status != 200 || got.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("SSE status %d, header %v", got.Status, got.Header)
	}
	j := JSON(429, map[string]any{"error": map[string]any{"message": "slow down"}})
	if j.Status != 429 || !bytes.Equal(j.Body, []byte(`{"error":{"message":"slow down"}}`)) || j.Header.Get("Content-Type") != "application/json" {
		t.Errorf("JSON = %d %s %v", j.Status, j.Body, j.Header)
	}
}

func TestWaitBounds(t *testing.T) {
	for _, tc := range []struct{ ra, lo, hi time.Duration }{
		{0, time.Nanosecond, time.Minute},
		{2 * time.Second, 2 * time.Second, 2200 * time.Millisecond},
		{30 * time.Second, 30 * time.Second, 31 * time.Second},
	} {
		if lo, hi := waitBounds(tc.ra); lo != tc.lo || hi != tc.hi {
			t.Errorf("waitBounds(%v) = %v, %v; want %v, %v", tc.ra, lo, hi, tc.lo, tc.hi)
		}
	}
}
