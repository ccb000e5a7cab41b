package fake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

func TestRequestsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("a").Latency(time.Second), fake.Stream("b"))
		req := &llmclient.Request{
			Model:       "group",
			Messages:    []llmclient.Message{llmclient.UserMessage("question")},
			Tools:       []llmclient.Tool{{Name: "f", Parameters: []byte(`{"type":"object"}`)}},
			Temperature: llmclient.Float(0.5),
			Stop:        []string{"END"},
			Metadata:    map[string]string{"tenant": "t1"},
		}
		start := time.Now()
		if _, err := p.Complete(context.Background(), &llmclient.Call{Request: req, Model: "gpt-x", APIKey: "sk-test-1"}); err != nil {
			t.Fatal(err)
		}
		st, err := p.Stream(context.Background(), &llmclient.Call{Request: req, Model: "gpt-y", APIKey: "sk-test-2"})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		p.Complete(context.Background(), &llmclient.Call{Model: "gpt-z"}) // exhausted, still recorded

		// The caller reuses its request: the records keep what was sent.
		req.Messages[0].Content[0].Text = "changed"
		req.Messages = append(req.Messages, llmclient.UserMessage("more"))
		req.Tools[0].Parameters[0] = 'X'
		*req.Temperature = 2
		req.Stop[0] = "changed"
		req.Metadata["tenant"] = "changed"

		recs := p.Requests()
		if len(recs) != 3 || p.Calls() != 3 {
			t.Fatalf("%d records, Calls() = %d; want 3", len(recs), p.Calls())
		}
		want := []struct {
			model, key string
			stream     bool
			at         time.Duration
		}{
			{"gpt-x", "sk-test-1", false, 0},
			{"gpt-y", "sk-test-2", true, time.Second},
			{"gpt-z", "", false, time.Second},
		}
		for i, w := range want {
			r := recs[i]
			if r.Model != w.model || r.APIKey != w.key || r.Stream != w.stream || r.Time.Sub(start) != w.at {
				t.Errorf("record %d = model %q key %q stream %v at %v; want %+v",
					i, r.Model, r.APIKey, r.Stream, r.Time.Sub(start), w)
			}
		}
		for i, r := range recs[:2] {
			q := r.Request
			if q == req || len(q.Messages) != 1 || q.Messages[0].Text() != "question" ||
				string(q.Tools[0].Parameters) != `{"type":"object"}` || *q.Temperature != 0.5 ||
				q.Stop[0] != "END" || q.Metadata["tenant"] != "t1" || q.Model != "group" {
				t.Errorf("record %d request changed with the caller's: %+v", i, q)
			}
		}
		if recs[2].Request != nil {
			t.Errorf("record 2 request = %+v, want nil", recs[2].Request)
		}

		// Requests returns a copy.
		recs[0].Model = "mutated"
		if p.Requests()[0].Model != "gpt-x" {
			t.Error("changing the returned records changed the Provider's")
		}
	})
}
