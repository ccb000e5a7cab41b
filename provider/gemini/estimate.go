package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// TokenRatio is how many Gemini tokens a text costs per o200k_base token, the encoding
// llmclient's estimators count in. It is the root package's assumption for "gemini"
// models, not a measurement: Google's rule of thumb is about 4 characters per token,
// where o200k_base averages about 4.6 bytes per token on English prose.
const TokenRatio = 1.15

// EstimateBodyTokens estimates the prompt tokens of a raw GenerateContentRequest body, as
// the transport sees it: the system instruction, every content's text, function calls and
// function responses, fixed costs for inline and file data, the function declarations and
// the response schema, with llmclient.EstimatePromptTokens' framing, multiplied by
// TokenRatio (so callers must not apply a Gemini ratio again). The output reservation
// (generationConfig.maxOutputTokens) is not included. The model is read from the body's
// optional "model" field; the URL's model is not visible here. A nil est means
// estimate.Heuristic. It fails on a body that is not a JSON object. It is safe
// for concurrent use when est is.
func EstimateBodyTokens(body []byte, est estimate.Estimator) (int, error) {
	var w struct {
		Model string `json:"model"`
		wireBody
	}
	if !jsonx.IsObject(body) { // null and other values encoding/json takes for a struct
		return 0, errors.New("gemini: estimate: request body is not a JSON object")
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return 0, fmt.Errorf("gemini: estimate: request body: %w", err)
	}
	req := &llmclient.Request{Model: w.Model}
	w.addTo(req)
	n := llmclient.EstimatePromptTokens(est, req)
	return int(math.Ceil(float64(n) * TokenRatio)), nil
}

// wireBody is what EstimateBodyTokens and Inspect read of a GenerateContentRequest.
// EstimateBodyTokens adds the optional "model" field; Inspect takes the model from the URL.
type wireBody struct {
	SystemInstruction *estContent  `json:"systemInstruction"`
	Contents          []estContent `json:"contents"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		MaxOutputTokens    jsonx.Int       `json:"maxOutputTokens"` // read by Inspect only
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// addTo appends the body's system instruction, contents and function declarations to req
// and sets its response format from the response schema.
func (w *wireBody) addTo(req *llmclient.Request) {
	if w.SystemInstruction != nil {
		req.Messages = appendContent(req.Messages, llmclient.RoleSystem, w.SystemInstruction.Parts)
	}
	for _, c := range w.Contents {
		role := llmclient.RoleUser
		if c.Role == "model" {
			role = llmclient.RoleAssistant
		}
		req.Messages = appendContent(req.Messages, role, c.Parts)
	}
	for _, t := range w.Tools {
		for _, f := range t.FunctionDeclarations {
			params := f.ParametersJSONSchema
			if len(params) == 0 {
				params = f.Parameters
			}
			req.Tools = append(req.Tools, llmclient.Tool{Name: f.Name, Description: f.Description, Parameters: jsonx.CompactRaw(params)})
		}
	}
	if g := w.GenerationConfig; g != nil {
		schema := g.ResponseJSONSchema
		if len(schema) == 0 {
			schema = g.ResponseSchema
		}
		if len(schema) > 0 {
			req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Schema: jsonx.CompactRaw(schema)}
		}
	}
}

// estContent and estPart read contents for estimation; media payloads are skipped, not
// copied.
type estContent struct {
	Role  string    `json:"role"`
	Parts []estPart `json:"parts"`
}

type estPart struct {
	Text             string      `json:"text"`
	InlineData       *struct{}   `json:"inlineData"`
	FileData         *struct{}   `json:"fileData"`
	FunctionCall     *wireCall   `json:"functionCall"`
	FunctionResponse *wireResult `json:"functionResponse"`
}

// appendContent appends one message of role with the parts' text, media and function
// calls, and one tool message per function response.
func appendContent(msgs []llmclient.Message, role llmclient.Role, parts []estPart) []llmclient.Message {
	m := llmclient.Message{Role: role}
	for i := range parts {
		p := &parts[i]
		switch {
		case p.FunctionCall != nil:
			m.ToolCalls = append(m.ToolCalls, llmclient.ToolCall{Name: p.FunctionCall.Name, Arguments: jsonx.Compact(p.FunctionCall.Args)})
		case p.FunctionResponse != nil:
			msgs = append(msgs, llmclient.Message{
				Role:    llmclient.RoleTool,
				Name:    p.FunctionResponse.Name,
				Content: []llmclient.Part{llmclient.TextPart(jsonx.Compact(p.FunctionResponse.Response))},
			})
		case p.InlineData != nil, p.FileData != nil:
			m.Content = append(m.Content, llmclient.Part{Type: llmclient.PartImage})
		case p.Text != "":
			m.Content = append(m.Content, llmclient.TextPart(p.Text))
		}
	}
	if len(m.Content) > 0 || len(m.ToolCalls) > 0 {
		msgs = append(msgs, m)
	}
	return msgs
}
