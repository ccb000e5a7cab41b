package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// wireRequest is a GenerateContentRequest.
type wireRequest struct {
	Contents          []wireContent     `json:"contents"`
	SystemInstruction *wireContent      `json:"systemInstruction,omitempty"`
	Tools             []wireTool        `json:"tools,omitempty"`
	ToolConfig        *wireToolConfig   `json:"toolConfig,omitempty"`
	GenerationConfig  *wireGenerationIn `json:"generationConfig,omitempty"`
}

type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

// wirePart is a Part, in requests and responses.
type wirePart struct {
	Text             string        `json:"text,omitempty"`
	Thought          bool          `json:"thought,omitempty"`
	ThoughtSignature string        `json:"thoughtSignature,omitempty"`
	InlineData       *wireBlob     `json:"inlineData,omitempty"`
	FileData         *wireFileData `json:"fileData,omitempty"`
	FunctionCall     *wireCall     `json:"functionCall,omitempty"`
	FunctionResponse *wireResult   `json:"functionResponse,omitempty"`
}

type wireBlob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

type wireFileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type wireCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type wireResult struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type wireTool struct {
	FunctionDeclarations []wireFunction `json:"functionDeclarations"`
}

type wireFunction struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type wireToolConfig struct {
	FunctionCallingConfig wireCallingConfig `json:"functionCallingConfig"`
}

type wireCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type wireGenerationIn struct {
	MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMIMEType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
}

// skipSignature is the thought signature Google documents for replaying a function call
// that has none (a history written by another model or vendor); Gemini 3 models reject
// unsigned function calls of the current turn otherwise.
const skipSignature = "skip_thought_signature_validator"

// The generationConfig limits: temperature in [0, 2], topP in [0, 1] (clamped, with a
// note) and at most 5 stop sequences (the first 5 are sent, with a note).
const (
	maxTemperature = 2
	maxTopP        = 1
	maxStop        = 5
)

// buildBody encodes req as a GenerateContentRequest, recording how it translated the
// request in notes.
func buildBody(req *llmclient.Request, notes *adapter.Notes) ([]byte, error) {
	if req == nil {
		return nil, errors.New("gemini: nil request")
	}
	var w wireRequest
	var err error
	if w.SystemInstruction, w.Contents, err = convertMessages(req.Messages, notes); err != nil {
		return nil, err
	}
	if w.Tools, err = convertTools(req.Tools); err != nil {
		return nil, err
	}
	if w.ToolConfig, err = convertToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if req.DisableParallelToolCalls && len(req.Tools) > 0 {
		notes.Add("parallel tool calls not disabled: Gemini has no such setting (the model may call several functions at once)")
	}
	if w.GenerationConfig, err = generationConfig(req, notes); err != nil {
		return nil, err
	}
	body, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("gemini: encode request: %w", err)
	}
	if body, err = jsonx.MergeExtra(body, req.Extra); err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return body, nil
}

func generationConfig(req *llmclient.Request, notes *adapter.Notes) (*wireGenerationIn, error) {
	g := wireGenerationIn{StopSequences: adapter.LimitStops(notes, req.Stop, maxStop)}
	var err error
	if g.Temperature, err = adapter.Clamp(notes, "temperature", req.Temperature, 0, maxTemperature); err != nil {
		return nil, errors.New("gemini: " + err.Error())
	}
	if g.TopP, err = adapter.Clamp(notes, "topP", req.TopP, 0, maxTopP); err != nil {
		return nil, errors.New("gemini: " + err.Error())
	}
	switch {
	case req.MaxTokens < 0:
		return nil, errors.New("gemini: MaxTokens is negative")
	case req.MaxTokens > math.MaxInt32:
		return nil, errors.New("gemini: MaxTokens exceeds maxOutputTokens' int32 range")
	}
	if req.MaxTokens > 0 {
		g.MaxOutputTokens = req.MaxTokens
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case format.JSONObject:
			g.ResponseMIMEType = "application/json"
		case format.JSONSchema:
			if len(f.Schema) == 0 || !json.Valid(f.Schema) {
				return nil, errors.New("gemini: response format json_schema needs a valid JSON schema")
			}
			g.ResponseMIMEType = "application/json"
			g.ResponseJSONSchema = f.Schema
		}
	}
	if g.MaxOutputTokens == 0 && g.Temperature == nil && g.TopP == nil && len(g.StopSequences) == 0 &&
		g.ResponseMIMEType == "" {
		return nil, nil
	}
	return &g, nil
}

// convertMessages lifts system messages into the system instruction and turns the rest
// into user and model turns. Consecutive messages with the same wire role are merged, so
// that the function responses answering one turn's parallel calls share one content.
//
// What the API cannot take where it stands is moved or converted, with a note: images of
// a system message (the system instruction takes text only) become a user turn at the same
// place; images of tool results follow the run of function responses in their user turn;
// a tool result that answers no call of the model turn right before it (Gemini rejects a
// function response that does not) is sent as a text part.
func convertMessages(in []llmclient.Message, notes *adapter.Notes) (*wireContent, []wireContent, error) {
	var sys *wireContent
	out := make([]wireContent, 0, len(in))
	var moved []wirePart // images of the current run of tool results
	for i := range in {
		m := &in[i]
		var role string
		var parts []wirePart
		var err error
		if m.Role != llmclient.RoleTool && len(moved) > 0 {
			out[len(out)-1].Parts = append(out[len(out)-1].Parts, moved...)
			moved = nil
		}
		switch m.Role {
		case llmclient.RoleSystem:
			var images []llmclient.Part
			for _, p := range m.Content {
				switch {
				case p.Type == llmclient.PartImage:
					images = append(images, p)
				case p.Type != llmclient.PartText:
					return nil, nil, fmt.Errorf("gemini: message %d: unknown part type %d", i, p.Type)
				case p.Text != "":
					if sys == nil {
						sys = &wireContent{}
					}
					sys.Parts = append(sys.Parts, wirePart{Text: p.Text})
				}
			}
			if len(images) == 0 {
				continue
			}
			notes.Add("message %d: %d image(s) of the system prompt moved to a user turn (the system instruction takes text only)", i, len(images))
			role = "user"
			parts, err = contentParts(images, nil)
		case llmclient.RoleUser:
			role = "user"
			parts, err = contentParts(m.Content, nil)
		case llmclient.RoleAssistant:
			role = "model"
			if parts, err = contentParts(m.Content, nil); err == nil {
				parts, err = callParts(m.ToolCalls, parts)
			}
		case llmclient.RoleTool:
			role = "user"
			var images []wirePart
			if parts, images, err = resultParts(in[:i], m, i, notes); err == nil {
				moved = append(moved, images...)
			}
		default:
			err = fmt.Errorf("unknown role %q", m.Role)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("gemini: message %d: %w", i, err)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			continue
		}
		out = append(out, wireContent{Role: role, Parts: parts})
	}
	if len(moved) > 0 {
		out[len(out)-1].Parts = append(out[len(out)-1].Parts, moved...)
	}
	return sys, out, nil
}

// contentParts converts text and image parts, skipping empty text.
func contentParts(parts []llmclient.Part, dst []wirePart) ([]wirePart, error) {
	for _, p := range parts {
		switch p.Type {
		case llmclient.PartText:
			if p.Text != "" {
				dst = append(dst, wirePart{Text: p.Text})
			}
		case llmclient.PartImage:
			ip, err := imagePart(p)
			if err != nil {
				return nil, err
			}
			dst = append(dst, ip)
		default:
			return nil, fmt.Errorf("unknown part type %d", p.Type)
		}
	}
	return dst, nil
}

// imagePart encodes an image: bytes and data: URLs inline, other URLs as fileData (a Files
// API URI, a gs:// URI on Vertex AI, or an http(s) URL where the API accepts one).
func imagePart(p llmclient.Part) (wirePart, error) {
	mt, data, inline, err := adapter.InlineImage(p)
	switch {
	case err != nil:
		return wirePart{}, err
	case inline:
		return wirePart{InlineData: &wireBlob{MIMEType: mt, Data: data}}, nil
	}
	mt = p.MIMEType
	if mt == "" {
		mt = imageTypeByExt(p.ImageURL)
	}
	return wirePart{FileData: &wireFileData{MIMEType: mt, FileURI: p.ImageURL}}, nil
}

// imageTypeByExt guesses an image URL's MIME type from its extension, "" when unknown.
func imageTypeByExt(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	switch strings.ToLower(path.Ext(u)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".webp":
		return "image/webp"
	case ".gif":
		return "image/gif"
	case ".heic":
		return "image/heic"
	case ".heif":
		return "image/heif"
	}
	return ""
}

// callParts appends an assistant's tool calls as functionCall parts, restoring the thought
// signature carried in each ID (see ToolCall IDs in the package documentation). The first
// call of a turn without any signature gets skipSignature.
func callParts(calls []llmclient.ToolCall, dst []wirePart) ([]wirePart, error) {
	signed := false
	first := len(dst)
	for _, tc := range calls {
		if tc.Name == "" {
			return nil, fmt.Errorf("tool call %q has no name", tc.ID)
		}
		id, sig := splitID(tc.ID)
		fc := &wireCall{Name: tc.Name}
		if !isSynthetic(id) {
			fc.ID = id
		}
		if s := strings.TrimSpace(tc.Arguments); s != "" {
			if !json.Valid([]byte(s)) || s[0] != '{' {
				return nil, fmt.Errorf("tool call %q: arguments are not a JSON object", tc.ID)
			}
			fc.Args = json.RawMessage(s)
		}
		if sig != "" {
			signed = true
		}
		dst = append(dst, wirePart{FunctionCall: fc, ThoughtSignature: sig})
	}
	if !signed && len(calls) > 0 {
		dst[first].ThoughtSignature = skipSignature
	}
	return dst, nil
}

// resultParts converts a tool result into a functionResponse part, and its images into
// parts sent after the run of function responses. Gemini matches responses to calls by
// function name, so the name is that of the call with the same ID in the model turn right
// before (Message.Name when the call has none). A result that answers no call of that turn
// becomes a text part instead: Gemini rejects a function response that answers no call.
func resultParts(history []llmclient.Message, m *llmclient.Message, i int, notes *adapter.Notes) (parts, images []wirePart, err error) {
	if m.ToolCallID == "" {
		return nil, nil, errors.New("tool result without ToolCallID")
	}
	var text []llmclient.Part
	for _, p := range m.Content {
		switch p.Type {
		case llmclient.PartText:
			text = append(text, p)
		case llmclient.PartImage:
			ip, err := imagePart(p)
			if err != nil {
				return nil, nil, err
			}
			images = append(images, ip)
		default:
			return nil, nil, fmt.Errorf("unknown part type %d", p.Type)
		}
	}
	if len(images) > 0 {
		notes.Add("message %d: %d image(s) of a tool result sent after the function responses (a function response takes JSON only)", i, len(images))
	}
	output := llmclient.Message{Content: text}.Text()
	if output == "" && len(images) > 0 {
		output = "(The result is the image that follows.)"
	}
	name, found := lastTurnCall(history, m.ToolCallID)
	if !found {
		if name == "" {
			name = m.Name
		}
		label := "tool call " + m.ToolCallID
		if name != "" {
			label = "tool " + name + " (call " + m.ToolCallID + ")"
		}
		notes.Add("message %d: tool result %q answers no call of the turn before; sent as text", i, m.ToolCallID)
		what := "Result of "
		if m.IsError {
			what = "Error from "
		}
		return []wirePart{{Text: what + label + ": " + output}}, images, nil
	}
	if name == "" {
		name = m.Name
	}
	if name == "" {
		return nil, nil, fmt.Errorf("tool result %q answers a call without a name and has no Name", m.ToolCallID)
	}
	id, _ := splitID(m.ToolCallID)
	r := &wireResult{Name: name, Response: resultObject(output, m.IsError)}
	if !isSynthetic(id) {
		r.ID = id
	}
	return []wirePart{{FunctionResponse: r}}, images, nil
}

// lastTurnCall finds the call with the given id in the model turn right before the run of
// tool results that history ends with (consecutive assistant messages form one turn). It
// returns the call's name and whether it was found there; when it was not, name is the
// name of the latest call with that id earlier in history, or "".
func lastTurnCall(history []llmclient.Message, id string) (name string, found bool) {
	j := len(history) - 1
	for j >= 0 && history[j].Role == llmclient.RoleTool {
		j--
	}
	for ; j >= 0 && history[j].Role == llmclient.RoleAssistant; j-- {
		for _, tc := range history[j].ToolCalls {
			if tc.ID == id {
				return tc.Name, true
			}
		}
	}
	return findCallName(history, id), false
}

func findCallName(history []llmclient.Message, id string) string {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role != llmclient.RoleAssistant {
			continue
		}
		for _, tc := range history[i].ToolCalls {
			if tc.ID == id {
				return tc.Name
			}
		}
	}
	return ""
}

// resultObject is the functionResponse.response object: the tool's output when it is a
// JSON object, else {"output": <the text>} as the API documentation suggests. The result
// of a failed call is {"error": <the object or text>}: the spec's key for "error details"
// of a call that failed.
func resultObject(text string, isError bool) json.RawMessage {
	t := strings.TrimSpace(text)
	isObject := len(t) > 0 && t[0] == '{' && json.Valid([]byte(t))
	if isError {
		var detail any = text
		if isObject {
			detail = json.RawMessage(t)
		}
		b, _ := json.Marshal(struct {
			Error any `json:"error"`
		}{detail})
		return b
	}
	if isObject {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(struct {
		Output string `json:"output"`
	}{text})
	return b
}

func convertTools(tools []llmclient.Tool) ([]wireTool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	fns := make([]wireFunction, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("gemini: tool %d has no name", i)
		}
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return nil, fmt.Errorf("gemini: tool %q: parameters are not valid JSON", t.Name)
		}
		fns[i] = wireFunction{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters}
	}
	return []wireTool{{FunctionDeclarations: fns}}, nil
}

func convertToolChoice(tc *llmclient.ToolChoice) (*wireToolConfig, error) {
	if tc == nil {
		return nil, nil
	}
	var c wireCallingConfig
	switch tc.Mode {
	case llmclient.ToolChoiceAuto, "":
		c.Mode = "AUTO"
	case llmclient.ToolChoiceNone:
		c.Mode = "NONE"
	case llmclient.ToolChoiceRequired:
		c.Mode = "ANY"
	case llmclient.ToolChoiceTool:
		if tc.Name == "" {
			return nil, errors.New("gemini: tool choice \"tool\" needs a tool name")
		}
		c.Mode, c.AllowedFunctionNames = "ANY", []string{tc.Name}
	default:
		return nil, fmt.Errorf("gemini: unknown tool choice mode %q", tc.Mode)
	}
	return &wireToolConfig{FunctionCallingConfig: c}, nil
}
