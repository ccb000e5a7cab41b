package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
)

// respResponse is the Response object of the Responses API, as a one-shot body and as
// the "response" of response.completed, response.incomplete and response.failed events.
type respResponse struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Output            []respItem      `json:"output"`
	Error             json.RawMessage `json:"error"`
	Usage             *respUsage      `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// respItem is an output item: a message, a reasoning item (its summary, and its content's
// reasoning_text parts) or a function call (others are skipped).
type respItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Input     string `json:"input"` // custom_tool_call
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// usage converts the Responses usage: input_tokens includes the tokens read from the
// cache (cached_tokens) and those written to it (cache_write_tokens), and output_tokens
// the reasoning tokens, as llmclient.Usage counts them.
func (u *respUsage) usage() llmclient.Usage {
	out := llmclient.Usage{
		InputTokens:       int(u.InputTokens),
		OutputTokens:      int(u.OutputTokens),
		TotalTokens:       int(u.TotalTokens),
		CachedInputTokens: int(u.InputTokensDetails.CachedTokens),
		CacheWriteTokens:  int(u.InputTokensDetails.CacheWriteTokens),
		ReasoningTokens:   int(u.OutputTokensDetails.ReasoningTokens),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = adapter.AddTokens(out.InputTokens, out.OutputTokens)
	}
	return out
}

// responsesFinish maps a Response's status and incomplete reason to a finish reason:
// completed is finish.Stop, or finish.ToolCalls when the output calls functions, or
// finish.Refusal when the model refused; incomplete for max_output_tokens is finish.Length,
// for content_filter finish.ContentFilter, for anything else finish.Other. raw is the
// incomplete reason, else the status.
func responsesFinish(status, reason string, calls, refused bool) (finish.Reason, string) {
	switch status {
	case "completed":
		switch {
		case calls:
			return finish.ToolCalls, status
		case refused:
			return finish.Refusal, status
		}
		return finish.Stop, status
	case "incomplete":
		switch reason {
		case "max_output_tokens":
			return finish.Length, reason
		case "content_filter":
			return finish.ContentFilter, reason
		case "":
			return finish.Other, status
		}
		return finish.Other, reason
	case "":
		return finish.None, ""
	}
	return finish.Other, status
}

// parseResponsesBody decodes a 2xx Responses API body. A body that is not a Response, or
// a Response with status "failed" or an error object, is returned as an *llmclient.Error,
// as parseResponse does for Chat Completions: a failed response is classified by its
// error's code (failure.ServerError when it says nothing known), garbage is failure.ServerError.
func parseResponsesBody(status int, h http.Header, body []byte, now time.Time) (*llmclient.Response, *llmclient.Error) {
	var r respResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed(status, h, body, now, "malformed JSON: "+err.Error())
	}
	if e := failedResponse(status, h, &r, body, now); e != nil {
		return nil, e
	}
	if r.Status == "" && len(r.Output) == 0 {
		return nil, malformed(status, h, body, now, "response has neither status nor output")
	}
	out := &llmclient.Response{ID: r.ID, Model: r.Model, RateLimits: ParseRateLimits(h, now)}
	var text, reasoning, refusal strings.Builder
	for i := range r.Output {
		it := &r.Output[i]
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					refusal.WriteString(c.Refusal)
				}
			}
		case "reasoning":
			// Summaries (OpenAI's models), and the reasoning text itself where a server sends
			// it (open-weight models): a stream reports both as Reasoning too.
			for _, s := range it.Summary {
				reasoning.WriteString(s.Text)
			}
			for _, c := range it.Content {
				if c.Type == "reasoning_text" {
					reasoning.WriteString(c.Text)
				}
			}
		case "function_call":
			out.ToolCalls = append(out.ToolCalls, llmclient.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "custom_tool_call":
			out.ToolCalls = append(out.ToolCalls, llmclient.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Input})
		}
	}
	out.Text, out.Reasoning, out.Refusal = text.String(), reasoning.String(), refusal.String()
	reason := ""
	if d := r.IncompleteDetails; d != nil {
		reason = d.Reason
	}
	out.FinishReason, out.RawFinishReason = responsesFinish(r.Status, reason, len(out.ToolCalls) > 0, out.Refusal != "")
	if r.Usage != nil {
		out.Usage = r.Usage.usage()
	}
	return out, nil
}

// failedResponse returns the error of a Response that failed, or nil.
func failedResponse(status int, h http.Header, r *respResponse, body []byte, now time.Time) *llmclient.Error {
	errObj := bytes.TrimSpace(r.Error)
	hasErr := len(errObj) > 0 && !bytes.Equal(errObj, []byte("null"))
	if !hasErr && r.Status != "failed" {
		if r.Status == "" && len(r.Output) == 0 && bytes.Contains(body, []byte(`"error"`)) {
			return errorFromBodyAt(status, h, body, now) // a plain {"error":…} body
		}
		return nil
	}
	if !hasErr {
		errObj = []byte(`{"message":"response failed"}`)
	}
	e := errorFromBodyAt(status, h, append(append([]byte(`{"error":`), errObj...), '}'), now)
	if e.Class == failure.None || e.Class == failure.Unknown {
		e.Class = failure.ServerError
	}
	return e
}
