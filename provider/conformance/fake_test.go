package conformance_test

import (
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/provider/conformance"
	"github.com/llmclient/llmclient/provider/fake"
)

// fakeScript plays each reply as the fake.Step a test author would script for it.
type fakeScript struct{}

func (fakeScript) Render(r *conformance.Reply, _ *conformance.Seen) (int, error) {
	if r.Fail != nil {
		return fakeStatus(r.Fail.Kind), nil
	}
	return 200, nil // answers, and error events inside a 200 stream
}

// fakeStatus is the status a scripted failure of kind k carries.
func fakeStatus(k conformance.Kind) int {
	if k == conformance.KindBilling {
		return 402
	}
	return fake.StatusForClass(k.Class())
}

func (fakeScript) NewProvider(serve func(*conformance.Seen) (*conformance.Reply, error), apiKey string) (llmclient.Provider, error) {
	return fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
		r, err := serve(fakeSeen(call, apiKey))
		if err != nil {
			return fake.Error(err)
		}
		return fakeStep(r)
	}).Forever()), nil
}

// fakeStep is the step that plays r.
func fakeStep(r *conformance.Reply) fake.Step {
	if f := r.Fail; f != nil {
		return fake.FailClass(f.Kind.Class()).Status(fakeStatus(f.Kind)).RetryAfter(f.RetryAfter)
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
	case conformance.EndError:
		st.FailAfter(r.EndAfter, fake.FailClass(r.EndFail.Kind.Class()).Status(200).RetryAfter(r.EndFail.RetryAfter))
	case conformance.EndCut:
		st.CutAfter(r.EndAfter)
	}
	return st
}

// fakeSeen reports what a call to the fake carried; the fake's own key is apiKey.
func fakeSeen(call *llmclient.Call, apiKey string) *conformance.Seen {
	s := &conformance.Seen{Model: call.Model, APIKey: call.APIKey}
	if s.APIKey == "" {
		s.APIKey = apiKey
	}
	req := call.Request
	if req == nil {
		return s
	}
	for _, t := range req.Tools {
		s.Tools = append(s.Tools, t.Name)
	}
	for _, m := range req.Messages {
		s.ToolCalls = append(s.ToolCalls, m.ToolCalls...)
		if m.Role == llmclient.RoleTool {
			s.ToolResults = append(s.ToolResults, conformance.ToolResult{Ref: m.ToolCallID, Content: m.Text()})
		}
	}
	return s
}
