package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// call returns a call for model m with a one-message request.
func call(model string) *llmclient.Call {
	return &llmclient.Call{
		Model:   model,
		Request: &llmclient.Request{Model: model, Messages: []llmclient.Message{llmclient.UserMessage("hi")}},
	}
}

// outcome describes the result of one Complete call in a few words.
func outcome(resp *llmclient.Response, err error) string {
	var e *llmclient.Error
	switch {
	case errors.Is(err, fake.ErrExhausted):
		return "exhausted"
	case errors.As(err, &e):
		return fmt.Sprintf("%d", e.Status)
	case err != nil:
		return "err: " + err.Error()
	}
	return resp.Text
}

// completeN makes n Complete calls and describes their outcomes.
func completeN(p *fake.Provider, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = outcome(p.Complete(context.Background(), call("m")))
	}
	return out
}

// timeline reads st to its end and describes each chunk or error with the virtual time
// since the call started. Use it inside a synctest bubble.
func timeline(st llmclient.ProviderStream, start time.Time) []string {
	var out []string
	for {
		c, err := st.Recv()
		at := time.Since(start)
		switch {
		case err == io.EOF:
			return append(out, fmt.Sprintf("%v EOF", at))
		case err != nil:
			return append(out, fmt.Sprintf("%v error %v", at, err))
		}
		out = append(out, fmt.Sprintf("%v %s", at, describe(c)))
	}
}

func describe(c llmclient.Chunk) string {
	if c.KeepAlive {
		return "keep-alive"
	}
	var parts []string
	if c.Text != "" {
		parts = append(parts, fmt.Sprintf("text=%q", c.Text))
	}
	if c.Reasoning != "" {
		parts = append(parts, fmt.Sprintf("reasoning=%q", c.Reasoning))
	}
	if c.Refusal != "" {
		parts = append(parts, fmt.Sprintf("refusal=%q", c.Refusal))
	}
	for _, d := range c.ToolCalls {
		parts = append(parts, fmt.Sprintf("tool[%d]=%s,%s,%s", d.Index, d.ID, d.Name, d.Arguments))
	}
	if c.FinishReason != "" {
		parts = append(parts, fmt.Sprintf("finish=%s(%s)", c.FinishReason, c.RawFinishReason))
	}
	if c.Usage != nil {
		parts = append(parts, fmt.Sprintf("usage=%d+%d=%d", c.Usage.InputTokens, c.Usage.OutputTokens, c.Usage.TotalTokens))
	}
	if c.ID != "" || c.Model != "" {
		parts = append(parts, fmt.Sprintf("id=%s model=%s", c.ID, c.Model))
	}
	return strings.Join(parts, " ")
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
