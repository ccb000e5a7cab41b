package fake_test

import (
	"context"
	"io"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

func TestReportUsage(t *testing.T) {
	u := llmclient.Usage{InputTokens: 2100, OutputTokens: 5, TotalTokens: 2105, CachedInputTokens: 1000, CacheWriteTokens: 900, ReasoningTokens: 2}
	p := fake.New(fake.Reply("hi").Usage(1, 1).ReportUsage(u), fake.Stream("a", "b").ReportUsage(u))
	resp, err := p.Complete(context.Background(), &llmclient.Call{Request: &llmclient.Request{}})
	if err != nil || resp.Usage != u {
		t.Fatalf("Complete usage %+v, %v", resp, err)
	}
	st, err := p.Stream(context.Background(), &llmclient.Call{Request: &llmclient.Request{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got *llmclient.Usage
	for {
		c, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			got = c.Usage
		}
	}
	if got == nil || *got != u {
		t.Errorf("stream usage %+v, want %+v", got, u)
	}
}
