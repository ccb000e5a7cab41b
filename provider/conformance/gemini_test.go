package conformance_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmclient/llmclient"
	finishpkg "github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/conformance"
	"github.com/llmclient/llmclient/provider/gemini"
)

// geminiWire is the Gemini API wire format: ai.google.dev/gemini-api/docs (generateContent,
// streamGenerateContent?alt=sse, api-errors), errors as google.rpc.Status with details.
type geminiWire struct{}

func (geminiWire) NewProvider(baseURL string, client *http.Client, apiKey string) (llmclient.Provider, error) {
	return gemini.New(gemini.WithBaseURL(baseURL), gemini.WithHTTPClient(client), gemini.WithAPIKey(apiKey))
}

func (geminiWire) Decode(r *http.Request, body []byte) (*conformance.Seen, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if r.Method != http.MethodPost || !ok {
		return nil, fmt.Errorf("%s %s, want POST /v1beta/models/{model}:{method}", r.Method, r.URL.Path)
	}
	model, method, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, fmt.Errorf("path %s has no :method", r.URL.Path)
	}
	s := &conformance.Seen{Model: model, APIKey: r.Header.Get("X-Goog-Api-Key")}
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		if r.URL.Query().Get("alt") != "sse" {
			return nil, errors.New("streamGenerateContent without alt=sse")
		}
		s.Stream = true
	default:
		return nil, fmt.Errorf("unknown method %q", method)
	}
	if s.APIKey == "" {
		return nil, errors.New("no x-goog-api-key header")
	}
	if r.URL.Query().Has("key") {
		return nil, errors.New("the API key must not travel in the URL")
	}
	var b struct {
		SystemInstruction *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string          `json:"text"`
				ThoughtSignature string          `json:"thoughtSignature"`
				InlineData       json.RawMessage `json:"inlineData"`
				FileData         json.RawMessage `json:"fileData"`
				FunctionCall     *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	for _, t := range b.Tools {
		for _, d := range t.FunctionDeclarations {
			s.Tools = append(s.Tools, d.Name)
		}
	}
	if si := b.SystemInstruction; si != nil {
		var texts []string
		for _, p := range si.Parts {
			texts = append(texts, p.Text)
		}
		s.System = strings.Join(texts, "\n")
	}
	for _, c := range b.Contents {
		for _, p := range c.Parts {
			if p.InlineData != nil || p.FileData != nil {
				s.Images++
			}
			if p.ThoughtSignature != "" {
				s.Signatures = append(s.Signatures, p.ThoughtSignature)
			}
			// Gemini links a response to its call by name (and id, when the call had one).
			if fc := p.FunctionCall; fc != nil {
				s.ToolCalls = append(s.ToolCalls, llmclient.ToolCall{ID: fc.Name, Name: fc.Name, Arguments: string(fc.Args)})
			}
			if fr := p.FunctionResponse; fr != nil {
				s.ToolResults = append(s.ToolResults, conformance.ToolResult{Ref: fr.Name, Content: string(fr.Response)})
			}
		}
	}
	return s, nil
}

func geminiFinish(f finishpkg.Reason) string {
	switch f {
	case finishpkg.Length:
		return "MAX_TOKENS"
	case finishpkg.ContentFilter:
		return "SAFETY"
	}
	return "STOP" // also with function calls
}

func geminiUsage(u llmclient.Usage) map[string]any {
	return map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens,
		"totalTokenCount": u.InputTokens + u.OutputTokens, "cachedContentTokenCount": u.CachedInputTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.InputTokens}}}
}

// geminiSafety is the safetyRatings of a SAFETY-blocked candidate or prompt.
var geminiSafety = []any{
	map[string]any{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true},
	map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
}

func (w geminiWire) Render(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	if r.Fail != nil {
		return w.fail(r.Fail, req)
	}
	if r.Usage.CacheWriteTokens > 0 {
		return nil, conformance.NotApplicable("Gemini reports no prompt-cache writes")
	}
	if req.Stream {
		return w.stream(r, req)
	}
	var parts []any
	if text := strings.Join(r.Text, ""); text != "" {
		parts = append(parts, map[string]any{"text": text})
	}
	parts = append(parts, geminiCalls(r.ToolCalls, r.Signature)...)
	return conformance.JSON(http.StatusOK, map[string]any{
		"candidates":    []any{geminiCandidate(parts, geminiFinish(r.Finish))},
		"usageMetadata": geminiUsage(r.Usage), "modelVersion": req.Model, "responseId": "resp-cf1",
	}), nil
}

// geminiCalls renders function calls as Gemini does: without ids, args as an object, and
// a Gemini 3 thought signature on the first one when sig is set.
func geminiCalls(calls []llmclient.ToolCall, sig string) []any {
	var out []any
	for i, tc := range calls {
		part := map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": json.RawMessage(tc.Arguments)}}
		if i == 0 && sig != "" {
			part["thoughtSignature"] = sig
		}
		out = append(out, part)
	}
	return out
}

func geminiCandidate(parts []any, finish string) map[string]any {
	c := map[string]any{"index": 0}
	if len(parts) > 0 {
		c["content"] = map[string]any{"role": "model", "parts": parts}
	}
	if finish != "" {
		c["finishReason"] = finish
	}
	if finish == "SAFETY" {
		c["safetyRatings"] = geminiSafety
	}
	return c
}

// stream renders "data: {GenerateContentResponse}" events, no event names and no end
// marker: the last one carries the finish reason and the final usage.
func (w geminiWire) stream(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	resp := func(parts []any, finish string, u map[string]any) conformance.Event {
		m := map[string]any{"candidates": []any{geminiCandidate(parts, finish)}, "modelVersion": req.Model, "responseId": "resp-cf1"}
		if u != nil {
			m["usageMetadata"] = u
		}
		return conformance.Event{Data: m}
	}
	partial := map[string]any{"promptTokenCount": r.Usage.InputTokens, "totalTokenCount": r.Usage.InputTokens}
	var events []conformance.Event
	for i, t := range r.Text {
		if r.End != conformance.EndMarker && i == r.EndAfter {
			return w.streamEnd(r, events)
		}
		last := i == len(r.Text)-1 && len(r.ToolCalls) == 0 && r.End == conformance.EndMarker
		if last {
			events = append(events, resp([]any{map[string]any{"text": t}}, geminiFinish(r.Finish), geminiUsage(r.Usage)))
		} else {
			events = append(events, resp([]any{map[string]any{"text": t}}, "", partial))
		}
	}
	if r.End != conformance.EndMarker {
		return w.streamEnd(r, events)
	}
	if len(r.ToolCalls) > 0 || len(r.Text) == 0 {
		events = append(events, resp(geminiCalls(r.ToolCalls, r.Signature), geminiFinish(r.Finish), geminiUsage(r.Usage)))
	}
	return conformance.SSE(events...), nil
}

// streamEnd ends a stream early: a bare error line after HTTP 200, or nothing for a cut.
func (w geminiWire) streamEnd(r *conformance.Reply, events []conformance.Event) (*conformance.WireResponse, error) {
	if r.End == conformance.EndError {
		_, body, err := w.status(r.EndFail, nil)
		if err != nil {
			return nil, err
		}
		events = append(events, conformance.Event{Data: body})
	}
	return conformance.SSE(events...), nil
}

func (w geminiWire) fail(f *conformance.Failure, req *conformance.Seen) (*conformance.WireResponse, error) {
	if f.Kind == conformance.KindPromptBlocked {
		// A blocked prompt is a 200 with promptFeedback and no candidates.
		body := map[string]any{
			"promptFeedback": map[string]any{"blockReason": "SAFETY", "safetyRatings": geminiSafety},
			"usageMetadata":  map[string]any{"promptTokenCount": 12, "totalTokenCount": 12},
			"modelVersion":   req.Model, "responseId": "resp-cf1",
		}
		if req.Stream {
			return conformance.SSE(conformance.Event{Data: body}), nil
		}
		return conformance.JSON(http.StatusOK, body), nil
	}
	status, body, err := w.status(f, req)
	if err != nil {
		return nil, err
	}
	return conformance.JSON(status, body), nil
}

// status returns the google.rpc.Status body {"error":{"code","message","status","details"}}
// for f, and its HTTP status. req is nil for an error line inside a stream.
func (geminiWire) status(f *conformance.Failure, req *conformance.Seen) (int, map[string]any, error) {
	key := ""
	if req != nil {
		key = req.APIKey
	}
	var code int
	var status, msg string
	var details []any
	quota := func(id string) map[string]any {
		return map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
			"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": id,
			"quotaDimensions": map[string]any{"location": "global", "model": conformance.Model}, "quotaValue": "10"}}}
	}
	help := map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]any{
		"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}}
	switch f.Kind {
	case conformance.KindRateLimited:
		return 0, nil, conformance.NotApplicable("the Gemini API sends no Retry-After header; its wait is RetryInfo in the body")
	case conformance.KindRateLimitedBodyHint:
		secs := strconv.FormatFloat(f.RetryAfter.Seconds(), 'f', -1, 64)
		code, status = 429, "RESOURCE_EXHAUSTED"
		msg = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: " +
			conformance.Model + "\nPlease retry in " + secs + "s."
		details = []any{quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"), help,
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": secs + "s"}}
	case conformance.KindQuota429:
		code, status = 429, "RESOURCE_EXHAUSTED"
		msg = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
		details = []any{quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier"), help}
	case conformance.KindBilling:
		code, status = 402, "RESOURCE_EXHAUSTED"
		msg = "Your prepaid credits are depleted. Please add credits to continue using the Gemini API."
	case conformance.KindOverloaded:
		code, status, msg = 503, "UNAVAILABLE", "The model is overloaded. Please try again later."
	case conformance.KindServerError:
		code, status, msg = 500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	case conformance.KindTimeout:
		code, status, msg = 504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."
	case conformance.KindBadRequest:
		code, status = 400, "INVALID_ARGUMENT"
		msg = "Invalid JSON payload received. Unknown name \"temprature\" at 'generation_config': Cannot find field."
		details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": []any{
			map[string]any{"field": "generation_config", "description": "Invalid JSON payload received. Unknown name \"temprature\" at 'generation_config': Cannot find field."}}}}
	case conformance.KindContextLength:
		code, status, msg = 400, "INVALID_ARGUMENT", "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)."
	case conformance.KindAuth:
		// The Gemini API answers a bad key with 400 and ErrorInfo reason API_KEY_INVALID.
		code, status = 400, "INVALID_ARGUMENT"
		msg = "API key not valid. Please pass a valid API key. (key: " + key + ")"
		details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
			"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}}}
	case conformance.KindPermission:
		code, status = 403, "PERMISSION_DENIED"
		msg = "Permission denied: Consumer 'api_key:" + key + "' has been suspended."
		details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "CONSUMER_SUSPENDED",
			"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}}}
	case conformance.KindNotFound:
		code, status = 404, "NOT_FOUND"
		msg = "models/" + conformance.Model + " is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."
	default:
		return 0, nil, fmt.Errorf("gemini wire: unknown failure kind %q", f.Kind)
	}
	e := map[string]any{"code": code, "message": msg, "status": status}
	if details != nil {
		e["details"] = details
	}
	return code, map[string]any{"error": e}, nil
}

// DecodeEmbed reads POST /v1beta/models/{model}:embedContent (one EmbedContentRequest) or
// :batchEmbedContents ({"requests":[…]}, each naming the same model).
func (geminiWire) DecodeEmbed(r *http.Request, body []byte) (*conformance.EmbedSeen, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if r.Method != http.MethodPost || !ok {
		return nil, fmt.Errorf("%s %s, want POST /v1beta/models/{model}:embedContent", r.Method, r.URL.Path)
	}
	model, method, _ := strings.Cut(rest, ":")
	key := r.Header.Get("X-Goog-Api-Key")
	if key == "" {
		return nil, errors.New("no x-goog-api-key header")
	}
	type one struct {
		Model   string `json:"model"`
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		OutputDimensionality int `json:"outputDimensionality"`
	}
	var reqs []one
	switch method {
	case "embedContent":
		var o one
		if err := json.Unmarshal(body, &o); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		reqs = []one{o}
	case "batchEmbedContents":
		var b struct {
			Requests []one `json:"requests"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		if len(b.Requests) < 2 {
			return nil, errors.New("batchEmbedContents for fewer than two inputs; use embedContent")
		}
		reqs = b.Requests
	default:
		return nil, fmt.Errorf("unknown method %q", method)
	}
	s := &conformance.EmbedSeen{Model: model, APIKey: key}
	for _, o := range reqs {
		if o.Model != "models/"+model {
			return nil, fmt.Errorf("request model %q, want models/%s", o.Model, model)
		}
		if len(o.Content.Parts) != 1 {
			return nil, fmt.Errorf("%d parts, want one text", len(o.Content.Parts))
		}
		s.Inputs = append(s.Inputs, o.Content.Parts[0].Text)
		s.Dimensions = o.OutputDimensionality
	}
	return s, nil
}

// RenderEmbed answers with an EmbedContentResponse or BatchEmbedContentsResponse.
func (geminiWire) RenderEmbed(r *conformance.EmbedReply, req *conformance.EmbedSeen) (*conformance.WireResponse, error) {
	body := map[string]any{}
	if len(req.Inputs) == 1 && len(r.Vectors) == 1 {
		body["embedding"] = map[string]any{"values": r.Vectors[0]}
	} else {
		var list []any
		for _, v := range r.Vectors {
			list = append(list, map[string]any{"values": v})
		}
		body["embeddings"] = list
	}
	if r.InputTokens > 0 {
		body["usageMetadata"] = map[string]any{"promptTokenCount": r.InputTokens}
	}
	return conformance.JSON(http.StatusOK, body), nil
}
