package fake_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

func stallCall(model string) *llmclient.Call {
	return &llmclient.Call{Model: model, APIKey: "k", Request: &llmclient.Request{Model: model, Messages: []llmclient.Message{llmclient.UserMessage("hi")}}}
}

func elapsedOf(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// StallAfter with k past the number of chunks waits before the final chunk.
func TestFakeStallAfterPastTheEndWaitsBeforeTheFinalChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").StallAfter(5, 10*time.Second))
		var resp *llmclient.Response
		var err error
		d := elapsedOf(func() { resp, err = p.Complete(context.Background(), stallCall("m")) })
		if err != nil || resp.Text != "ab" {
			t.Fatalf("%v %v", resp, err)
		}
		if d != 10*time.Second {
			t.Fatalf("StallAfter(5, 10s) on a 2-chunk stream waited %v, want 10s before the final chunk", d)
		}
	})
}

// ... or before the error that replaces it: a stall at the chunk count on a stream cut
// earlier.
func TestFakeStallAfterPastTheEndWaitsBeforeTheCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c").CutAfter(1).StallAfter(3, 10*time.Second))
		st, err := p.Stream(context.Background(), stallCall("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if c, err := st.Recv(); err != nil || c.Text != "a" {
			t.Fatalf("%v %v", c, err)
		}
		var rerr error
		d := elapsedOf(func() { _, rerr = st.Recv() })
		if !errors.Is(rerr, io.ErrUnexpectedEOF) {
			t.Fatalf("want cut: %v", rerr)
		}
		if d != 10*time.Second {
			t.Fatalf("StallAfter(3) on a 3-chunk stream cut after 1: error came after %v, want 10s", d)
		}
	})
}
