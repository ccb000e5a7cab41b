package llmclient

import (
	"encoding/json"
	"time"

	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/ratelimit"
)

// Role is the author of a Message.
type Role string

// The roles a Message can have.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// PartType says what a Part holds.
type PartType uint8

// The kinds of content part.
const (
	PartText  PartType = iota // Text
	PartImage                 // ImageURL, or ImageData with MIMEType
)

// Part is one piece of a message's content: text or an image.
type Part struct {
	Type PartType
	Text string
	// ImageURL is an http(s) or data: URL. When empty, ImageData and MIMEType are used.
	ImageURL  string
	ImageData []byte
	MIMEType  string
	// Detail is an optional vendor hint for images ("low", "high", "auto").
	Detail string
	// Cache, when set, marks a prompt-cache breakpoint after this part: see CacheControl.
	// In a system message it marks the system prompt up to this part.
	Cache *CacheControl
}

// TextPart returns a text Part.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// ImageURLPart returns an image Part that refers to an image by URL.
func ImageURLPart(url string) Part { return Part{Type: PartImage, ImageURL: url} }

// ImageDataPart returns an image Part carrying the image bytes (sent base64-encoded).
func ImageDataPart(mimeType string, data []byte) Part {
	return Part{Type: PartImage, MIMEType: mimeType, ImageData: data}
}

// Message is one turn of a conversation.
type Message struct {
	Role    Role
	Content []Part
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall
	// ToolCallID links a RoleTool message (a tool result) to the call it answers.
	ToolCallID string
	// IsError marks a RoleTool message as the result of a tool call that failed; its
	// Content says how. Default false: the call succeeded. Other roles ignore it.
	// Anthropic's adapter sends it as the tool_result's is_error, Gemini's puts the result
	// under the function response's "error" key in place of "output"; OpenAI's APIs have
	// no such flag, so its adapter sends the result as written, with a note in Call.Notes.
	IsError bool
	// Name is an optional participant or tool name.
	Name string
	// Cache, when set, marks a prompt-cache breakpoint after the message's last content:
	// its last part, its last tool call, or the tool result. See CacheControl.
	Cache *CacheControl
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	if len(m.Content) == 1 {
		return m.Content[0].Text
	}
	var n int
	for _, p := range m.Content {
		n += len(p.Text)
	}
	b := make([]byte, 0, n)
	for _, p := range m.Content {
		b = append(b, p.Text...)
	}
	return string(b)
}

// SystemMessage returns a system message with one text part.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Content: []Part{TextPart(text)}}
}

// UserMessage returns a user message with one text part.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Content: []Part{TextPart(text)}}
}

// AssistantMessage returns an assistant message with one text part.
func AssistantMessage(text string) Message {
	return Message{Role: RoleAssistant, Content: []Part{TextPart(text)}}
}

// ToolResultMessage returns the result of the tool call with the given id.
func ToolResultMessage(toolCallID, content string) Message {
	return Message{Role: RoleTool, ToolCallID: toolCallID, Content: []Part{TextPart(content)}}
}

// Tool describes a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object. Nil means no parameters.
	Parameters json.RawMessage
	// Strict asks vendors that support it to follow the schema exactly.
	Strict bool
	// Cache, when set, marks a prompt-cache breakpoint after this tool's definition (and
	// the tools before it). See CacheControl.
	Cache *CacheControl
}

// CacheControl marks a prompt-cache breakpoint: the vendor caches the prompt prefix that
// ends with the marked content (tools, then the system prompt, then messages, in that
// order), so a later request that starts with the same prefix reads it from the cache.
//
// Anthropic renders it as cache_control {"type":"ephemeral"} (with "ttl" when TTL is
// set) on the marked block; it accepts at most 4 breakpoints per request. OpenAI, Gemini
// and the other adapters cache prompt prefixes on their own and ignore CacheControl
// without an error. Cache reads and writes are reported in Usage.CachedInputTokens and
// Usage.CacheWriteTokens.
type CacheControl struct {
	// TTL is the entry's lifetime: 0 for the vendor's default (5 minutes for Anthropic),
	// else 5m (refreshed on every hit) or 1h (written at a higher price); Anthropic's
	// adapter refuses other values.
	TTL time.Duration
}

// ToolChoiceMode says whether and how the model must call tools.
type ToolChoiceMode string

// The tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	ToolChoiceTool     ToolChoiceMode = "tool" // call the tool named in ToolChoice.Name
)

// ToolChoice constrains tool use. A nil *ToolChoice leaves the vendor's default.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// ToolCall is one function call made by the model.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON arguments object as the model wrote it.
	Arguments string
}

// ResponseFormat asks for JSON output, optionally matching a schema.
type ResponseFormat struct {
	Type   format.Type
	Name   string          // schema name, for format.JSONSchema
	Schema json.RawMessage // JSON Schema, for format.JSONSchema
	Strict bool
}

// Request is one chat request, independent of vendor.
//
// The Client never modifies a Request; adapters must not either. A Request may be reused
// after the call returns.
type Request struct {
	// Model names the model or model group. Upstreams may map it to their own model name.
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is nil for the vendor default.
	ToolChoice *ToolChoice
	// DisableParallelToolCalls asks for at most one tool call per answer. Default false:
	// the vendor's default, which lets the model call several tools at once. It matters
	// only with Tools: OpenAI's adapter sends parallel_tool_calls false (Chat Completions
	// and Responses), Anthropic's tool_choice.disable_parallel_tool_use (with tool_choice
	// auto when ToolChoice is nil; ToolChoiceNone calls no tool and needs none). Gemini has
	// no such setting: its adapter sends the request without it, with a note in Call.Notes.
	DisableParallelToolCalls bool
	// MaxTokens bounds the output. 0 means the vendor default (adapters that require a
	// value, such as Anthropic's, apply their own default).
	MaxTokens   int
	Temperature *float64
	TopP        *float64
	Stop        []string
	// ResponseFormat is nil for plain text.
	ResponseFormat *ResponseFormat
	// Metadata is per-request information for the Client (partition keys, tracing). It is
	// not sent upstream.
	Metadata map[string]string
	// Priority selects the admission share under limits. Default ratelimit.Interactive.
	Priority ratelimit.Priority
	// PromptCacheKey groups requests that share a long prompt prefix for the vendor's
	// prompt cache: OpenAI's adapter sends it as prompt_cache_key (Chat Completions and
	// Responses), the other adapters do not send it. With WithCacheAffinity it also keys
	// the choice of upstream and key in place of the prompt's prefix. Empty: none. The
	// Responses API takes at most 64 characters (a longer key is refused before sending).
	PromptCacheKey string
	// Extra holds vendor fields the common type lacks. Adapters merge it into the top level
	// of the JSON request body, overriding fields they set themselves.
	Extra map[string]any
}

// Float returns a pointer to v, for Request.Temperature and Request.TopP.
func Float(v float64) *float64 { return &v }

// priorityIndex is p's index in per-priority tables: an unknown priority is interactive.
func priorityIndex(p ratelimit.Priority) ratelimit.Priority {
	if p >= numPriorities {
		return ratelimit.Interactive
	}
	return p
}

const numPriorities = ratelimit.Batch + 1
