package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// wireResponse is a GenerateContentResponse; in a stream, a data line may instead carry
// an error object.
type wireResponse struct {
	Candidates     []wireCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *wireUsage  `json:"usageMetadata"`
	ModelVersion  string      `json:"modelVersion"`
	ResponseID    string      `json:"responseId"`
	Error         *wireStatus `json:"error"`
}

type wireCandidate struct {
	Content      *wireContent `json:"content"`
	FinishReason string       `json:"finishReason"`
}

// wireUsage is usageMetadata. Counts are read as every usage reader reads them
// (jsonx.Count): a count that is not an integer never fails the answer; one that cannot be
// a count reads as -1, which the Client takes as no report.
type wireUsage struct {
	PromptTokenCount        jsonx.Count `json:"promptTokenCount"`
	CandidatesTokenCount    jsonx.Count `json:"candidatesTokenCount"`
	ThoughtsTokenCount      jsonx.Count `json:"thoughtsTokenCount"`
	CachedContentTokenCount jsonx.Count `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount jsonx.Count `json:"toolUsePromptTokenCount"`
	TotalTokenCount         jsonx.Count `json:"totalTokenCount"`
}

// parseResponse decodes a one-shot response body. A prompt blocked before generation
// (promptFeedback.blockReason and no candidates) is returned as an *llmclient.Error of class
// content_filtered whose Partial carries the id, model and usage. Made-up tool-call ids
// are numbered from idBase (see priorCalls).
func parseResponse(status int, body []byte, idBase int) (*llmclient.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, malformed(status, body, fmt.Errorf("malformed response: %w", err))
	}
	if w.Error != nil {
		return nil, inBandError(status, w.Error)
	}
	resp := &llmclient.Response{ID: w.ResponseID, Model: w.ModelVersion}
	if w.UsageMetadata != nil {
		resp.Usage = usage(w.UsageMetadata)
	}
	if len(w.Candidates) == 0 {
		if err := blocked(&w, resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
	c := &w.Candidates[0]
	var text, reasoning strings.Builder
	if c.Content != nil {
		for i := range c.Content.Parts {
			p := &c.Content.Parts[i]
			switch {
			case p.FunctionCall != nil:
				resp.ToolCalls = append(resp.ToolCalls, toolCall(p, idBase+len(resp.ToolCalls)))
			case p.Thought:
				reasoning.WriteString(p.Text)
			default:
				text.WriteString(p.Text)
			}
		}
	}
	resp.Text, resp.Reasoning = text.String(), reasoning.String()
	resp.RawFinishReason = c.FinishReason
	resp.FinishReason = finishReason(c.FinishReason, len(resp.ToolCalls) > 0)
	return resp, nil
}

// inBandError classifies an error object received with a 2xx status: its own code and
// status name decide; when they say nothing known, it is a server error, since the
// upstream failed after accepting the request.
func inBandError(status int, st *wireStatus) *llmclient.Error {
	e := fromStatus(status, st, nil)
	if e.Class == failure.Unknown {
		e.Class = failure.ServerError
	}
	return e
}

// blocked returns the content_filtered error for a blocked prompt, nil when the response
// is not one.
func blocked(w *wireResponse, partial *llmclient.Response) *llmclient.Error {
	if w.PromptFeedback == nil || w.PromptFeedback.BlockReason == "" {
		return nil
	}
	reason := w.PromptFeedback.BlockReason
	partial.FinishReason = finish.ContentFilter
	partial.RawFinishReason = reason
	return &llmclient.Error{
		Class:   failure.ContentFiltered,
		Status:  http.StatusOK,
		Code:    reason,
		Message: "prompt blocked: " + reason,
		Partial: partial,
	}
}

// toolCall converts a functionCall part; n numbers the call in the conversation (see
// priorCalls), used to make up an ID when Gemini gives none.
func toolCall(p *wirePart, n int) llmclient.ToolCall {
	id := p.FunctionCall.ID
	if id == "" {
		id = synthID(n)
	}
	args := "{}"
	if a := p.FunctionCall.Args; len(a) > 0 && string(a) != "null" {
		args = string(a)
	}
	return llmclient.ToolCall{ID: joinID(id, p.ThoughtSignature), Name: p.FunctionCall.Name, Arguments: args}
}

// usage converts usageMetadata. Thoughts are billed as output, so OutputTokens is
// candidates + thoughts and ReasoningTokens the thoughts; InputTokens is the prompt plus
// tool-use prompt tokens, of which CachedInputTokens came from the context cache.
// TotalTokens is Gemini's totalTokenCount when reported. A count that cannot be one
// (negative) makes the counts it is part of -1 (adapter.SumCounts).
func usage(u *wireUsage) llmclient.Usage {
	out := llmclient.Usage{
		InputTokens:       adapter.SumCounts(int(u.PromptTokenCount), int(u.ToolUsePromptTokenCount)),
		OutputTokens:      adapter.SumCounts(int(u.CandidatesTokenCount), int(u.ThoughtsTokenCount)),
		CachedInputTokens: int(u.CachedContentTokenCount),
		ReasoningTokens:   int(u.ThoughtsTokenCount),
		TotalTokens:       int(u.TotalTokenCount),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = adapter.AddTokens(out.InputTokens, out.OutputTokens)
	}
	return out
}

// finishReason normalizes a finishReason. Gemini says STOP when it calls functions too, so
// STOP with function calls is finish.ToolCalls. The safety family is finish.ContentFilter;
// MALFORMED_FUNCTION_CALL, OTHER, LANGUAGE and the rest are finish.Other.
func finishReason(s string, calls bool) finish.Reason {
	switch s {
	case "":
		return finish.None
	case "STOP":
		if calls {
			return finish.ToolCalls
		}
		return finish.Stop
	case "MAX_TOKENS":
		return finish.Length
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return finish.ContentFilter
	}
	return finish.Other
}

// priorCalls counts the tool calls of the request's history: the made-up ids of a
// response's calls are numbered after them, so that ids stay unique across a
// conversation's turns (call_0, call_1 in one turn, call_2 in the next), which vendors
// that take the conversation over (Anthropic requires unique tool_use ids) rely on.
func priorCalls(req *llmclient.Request) int {
	n := 0
	if req != nil {
		for i := range req.Messages {
			n += len(req.Messages[i].ToolCalls)
		}
	}
	return n
}
