package fake_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestUsageTotalSaturates checks that Usage(in, out) never wraps TotalTokens around to a
// negative number, for Reply and Stream steps alike.
func TestUsageTotalSaturates(t *testing.T) {
	p := fake.New(fake.Reply("a").Usage(math.MaxInt, 1), fake.Stream("a").Usage(math.MaxInt, math.MaxInt))
	call := &llmclient.Call{Model: "m", Request: &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}}
	for i := range 2 {
		resp, err := p.Complete(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.TotalTokens != math.MaxInt {
			t.Errorf("step %d: total %d, want %d", i, resp.Usage.TotalTokens, math.MaxInt)
		}
	}
}

// TestStallOverflow checks that a huge stall on top of ChunkDelay stays a huge wait
// instead of wrapping around to none.
func TestStallOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").ChunkDelay(time.Second).StallAfter(1, math.MaxInt64))
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		st, err := p.Stream(ctx, &llmclient.Call{Model: "m", Request: &llmclient.Request{Model: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		c, err := st.Recv()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Recv = %+v, %v; want the context's deadline", c, err)
		}
	})
}
