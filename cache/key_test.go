package cache_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullRequest sets every field of a Request and of the types it holds.
func fullRequest() *llmclient.Request {
	return &llmclient.Request{
		Model: "gpt",
		Messages: []llmclient.Message{
			{Role: llmclient.RoleSystem, Content: []llmclient.Part{{Type: llmclient.PartText, Text: "be brief",
				Cache: &llmclient.CacheControl{TTL: 5 * time.Minute}}}},
			{Role: llmclient.RoleUser, Name: "ann", Content: []llmclient.Part{
				{Type: llmclient.PartText, Text: "what is this?"},
				{Type: llmclient.PartImage, ImageURL: "https://img/1.png", Detail: "low"},
				{Type: llmclient.PartImage, ImageData: []byte{1, 2, 3}, MIMEType: "image/png"},
			}, Cache: &llmclient.CacheControl{}},
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "c1", Name: "look", Arguments: `{"q":1}`}}},
			{Role: llmclient.RoleTool, ToolCallID: "c1", Content: []llmclient.Part{llmclient.TextPart("a cat")}, IsError: true},
		},
		Tools: []llmclient.Tool{{Name: "look", Description: "looks", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"integer"}}}`),
			Strict: true, Cache: &llmclient.CacheControl{}}},
		ToolChoice:               &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "look"},
		DisableParallelToolCalls: true,
		MaxTokens:                100,
		Temperature:              llmclient.Float(0.2),
		TopP:                     llmclient.Float(0.9),
		Stop:                     []string{"END"},
		ResponseFormat:           &llmclient.ResponseFormat{Type: format.JSONSchema, Name: "s", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
		Metadata:                 map[string]string{"tenant": "t1", "trace": "abc"},
		Priority:                 ratelimit.Interactive,
		Extra:                    map[string]any{"seed": 7, "reasoning": map[string]any{"effort": "low"}},
	}
}

func key(r *llmclient.Request) string { return cache.Key("", "", r) }

// keyCase changes one field of the full request.
type keyCase struct {
	field  string // Type.Field, for the coverage check
	name   string
	change func(r *llmclient.Request)
}

var changesKey = []keyCase{
	{"Request.Model", "model", func(r *llmclient.Request) { r.Model = "gpt-2" }},
	{"Request.Messages", "one message fewer", func(r *llmclient.Request) { r.Messages = r.Messages[:3] }},
	{"Request.Messages", "messages reordered", func(r *llmclient.Request) { r.Messages[2], r.Messages[3] = r.Messages[3], r.Messages[2] }},
	{"Message.Role", "role", func(r *llmclient.Request) { r.Messages[1].Role = llmclient.RoleAssistant }},
	{"Message.Content", "a part fewer", func(r *llmclient.Request) { r.Messages[1].Content = r.Messages[1].Content[:2] }},
	{"Message.ToolCalls", "tool call args", func(r *llmclient.Request) { r.Messages[2].ToolCalls[0].Arguments = `{"q":2}` }},
	{"Message.ToolCallID", "tool call id", func(r *llmclient.Request) { r.Messages[3].ToolCallID = "c2" }},
	{"Message.IsError", "tool result no longer an error", func(r *llmclient.Request) { r.Messages[3].IsError = false }},
	{"Message.Name", "name", func(r *llmclient.Request) { r.Messages[1].Name = "bob" }},
	{"Message.Cache", "message cache mark removed", func(r *llmclient.Request) { r.Messages[1].Cache = nil }},
	{"Part.Type", "part type", func(r *llmclient.Request) { r.Messages[1].Content[0].Type = llmclient.PartImage }},
	{"Part.Text", "text", func(r *llmclient.Request) { r.Messages[1].Content[0].Text = "what is that?" }},
	{"Part.Text", "text moved between parts", func(r *llmclient.Request) {
		r.Messages[1].Content = []llmclient.Part{llmclient.TextPart("what is"), llmclient.TextPart(" this?")}
	}},
	{"Part.ImageURL", "image url", func(r *llmclient.Request) { r.Messages[1].Content[1].ImageURL = "https://img/2.png" }},
	{"Part.ImageData", "image bytes", func(r *llmclient.Request) { r.Messages[1].Content[2].ImageData = []byte{1, 2, 4} }},
	{"Part.MIMEType", "mime type", func(r *llmclient.Request) { r.Messages[1].Content[2].MIMEType = "image/jpeg" }},
	{"Part.Detail", "detail", func(r *llmclient.Request) { r.Messages[1].Content[1].Detail = "high" }},
	{"Part.Cache", "part cache mark", func(r *llmclient.Request) { r.Messages[0].Content[0].Cache = nil }},
	{"CacheControl.TTL", "cache ttl", func(r *llmclient.Request) { r.Messages[0].Content[0].Cache.TTL = time.Hour }},
	{"ToolCall.ID", "tool call id in assistant message", func(r *llmclient.Request) { r.Messages[2].ToolCalls[0].ID = "c9" }},
	{"ToolCall.Name", "tool call name", func(r *llmclient.Request) { r.Messages[2].ToolCalls[0].Name = "peek" }},
	{"ToolCall.Arguments", "tool call arguments", func(r *llmclient.Request) { r.Messages[2].ToolCalls[0].Arguments = `{}` }},
	{"Request.Tools", "no tools", func(r *llmclient.Request) { r.Tools = nil }},
	{"Tool.Name", "tool name", func(r *llmclient.Request) { r.Tools[0].Name = "peek" }},
	{"Tool.Description", "tool description", func(r *llmclient.Request) { r.Tools[0].Description = "peeks" }},
	{"Tool.Parameters", "tool parameters", func(r *llmclient.Request) { r.Tools[0].Parameters = json.RawMessage(`{"type":"object"}`) }},
	{"Tool.Parameters", "spaces inside a string", func(r *llmclient.Request) {
		r.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{"q":{"type":"integer","description":" "}}}`)
	}},
	{"Tool.Parameters", "no parameters", func(r *llmclient.Request) { r.Tools[0].Parameters = nil }},
	{"Tool.Strict", "tool strict", func(r *llmclient.Request) { r.Tools[0].Strict = false }},
	{"Tool.Cache", "tool cache mark", func(r *llmclient.Request) { r.Tools[0].Cache = nil }},
	{"Request.ToolChoice", "no tool choice", func(r *llmclient.Request) { r.ToolChoice = nil }},
	{"ToolChoice.Mode", "tool choice mode", func(r *llmclient.Request) { r.ToolChoice.Mode = llmclient.ToolChoiceRequired }},
	{"ToolChoice.Name", "tool choice name", func(r *llmclient.Request) { r.ToolChoice.Name = "peek" }},
	{"Request.DisableParallelToolCalls", "parallel tool calls allowed", func(r *llmclient.Request) { r.DisableParallelToolCalls = false }},
	{"Request.MaxTokens", "max tokens", func(r *llmclient.Request) { r.MaxTokens = 101 }},
	{"Request.Temperature", "temperature", func(r *llmclient.Request) { r.Temperature = llmclient.Float(0.3) }},
	{"Request.Temperature", "temperature unset", func(r *llmclient.Request) { r.Temperature = nil }},
	{"Request.TopP", "top p", func(r *llmclient.Request) { r.TopP = llmclient.Float(1) }},
	{"Request.Stop", "stop", func(r *llmclient.Request) { r.Stop = []string{"END", "STOP"} }},
	{"Request.ResponseFormat", "no response format", func(r *llmclient.Request) { r.ResponseFormat = nil }},
	{"ResponseFormat.Type", "format type", func(r *llmclient.Request) { r.ResponseFormat.Type = format.JSONObject }},
	{"ResponseFormat.Name", "format name", func(r *llmclient.Request) { r.ResponseFormat.Name = "t" }},
	{"ResponseFormat.Schema", "format schema", func(r *llmclient.Request) { r.ResponseFormat.Schema = json.RawMessage(`{"type":"array"}`) }},
	{"ResponseFormat.Strict", "format strict", func(r *llmclient.Request) { r.ResponseFormat.Strict = false }},
	{"Request.Extra", "extra value", func(r *llmclient.Request) { r.Extra["seed"] = 8 }},
	{"Request.Extra", "extra nested value", func(r *llmclient.Request) { r.Extra["reasoning"] = map[string]any{"effort": "high"} }},
	{"Request.Extra", "extra key added", func(r *llmclient.Request) { r.Extra["user"] = "u" }},
	{"Request.Extra", "extra big integers differ", func(r *llmclient.Request) { r.Extra["seed"] = json.Number("12345678901234567891") }},
}

var keepsKey = []keyCase{
	{"Request.Metadata", "metadata", func(r *llmclient.Request) { r.Metadata = map[string]string{"tenant": "t2"} }},
	{"Request.Priority", "priority", func(r *llmclient.Request) { r.Priority = ratelimit.Batch }},
	{"Request.PromptCacheKey", "prompt cache key", func(r *llmclient.Request) { r.PromptCacheKey = "tenant-7" }},
	{"Tool.Parameters", "parameters spacing", func(r *llmclient.Request) {
		r.Tools[0].Parameters = json.RawMessage("{\"type\": \"object\",\n\t\"properties\": {\"q\": {\"type\": \"integer\"}}}")
	}},
	{"ResponseFormat.Schema", "schema spacing", func(r *llmclient.Request) { r.ResponseFormat.Schema = json.RawMessage(` { "type" : "object" } `) }},
	{"Request.Extra", "extra numbers as floats", func(r *llmclient.Request) { r.Extra["seed"] = 7.0 }},
	{"Request.Extra", "extra as typed values", func(r *llmclient.Request) {
		r.Extra = map[string]any{"seed": json.Number("7"), "reasoning": struct {
			Effort string `json:"effort"`
		}{"low"}}
	}},
}

func TestKeyChangesWithEveryFieldThatReachesTheVendor(t *testing.T) {
	base := key(fullRequest())
	seen := map[string]bool{}
	for _, tc := range changesKey {
		t.Run(tc.name, func(t *testing.T) {
			r := fullRequest()
			tc.change(r)
			assert.NotEqual(t, base, key(r))
		})
		seen[tc.field] = true
	}
	for _, tc := range keepsKey {
		t.Run("same/"+tc.name, func(t *testing.T) {
			r := fullRequest()
			tc.change(r)
			assert.Equal(t, base, key(r))
		})
		seen[tc.field] = true
	}
	// Every field of every type in a Request is classified: a field added to
	// llmclient.Request and not written into the key fails here.
	for _, typ := range []any{llmclient.Request{}, llmclient.Message{}, llmclient.Part{}, llmclient.Tool{},
		llmclient.ToolChoice{}, llmclient.ResponseFormat{}, llmclient.ToolCall{}, llmclient.CacheControl{}} {
		rt := reflect.TypeOf(typ)
		for i := range rt.NumField() {
			f := rt.Name() + "." + rt.Field(i).Name
			assert.True(t, seen[f], "field %s has no case: does it change the answer? add it to the key and a case", f)
		}
	}
}

func TestKeyScopesAndMetadata(t *testing.T) {
	r := fullRequest()
	assert.NotEqual(t, cache.Key("", "t1", r), cache.Key("", "t2", r), "partitions")
	assert.NotEqual(t, cache.Key("v1", "", r), cache.Key("v2", "", r), "namespaces")
	assert.NotEqual(t, cache.Key("", "ab", r), cache.Key("a", "b", r), "fields are length-prefixed")
	withTenant := cache.Key("", "", r, "tenant")
	r2 := fullRequest()
	r2.Metadata["tenant"] = "t2"
	assert.NotEqual(t, withTenant, cache.Key("", "", r2, "tenant"), "named metadata counts")
	r2.Metadata = map[string]string{"tenant": "t1"}
	assert.Equal(t, withTenant, cache.Key("", "", r2, "tenant"), "other metadata does not")
	r3 := fullRequest()
	delete(r3.Metadata, "tenant")
	r4 := fullRequest()
	r4.Metadata["tenant"] = ""
	assert.NotEqual(t, cache.Key("", "", r3, "tenant"), cache.Key("", "", r4, "tenant"), "absent and empty differ")
	require.Len(t, withTenant, 64)
}

// A request as large as the writer's buffer many times over hashes like any other, and
// long texts that differ only at the end differ.
func TestKeyLongText(t *testing.T) {
	long := make([]byte, 100_000)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	a := &llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage(string(long))}}
	long[len(long)-1] = '!'
	b := &llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage(string(long))}}
	assert.NotEqual(t, key(a), key(b))
	assert.Equal(t, key(a), key(a))
}

// Extra that holds itself cannot be sent (encoding/json refuses the cycle), but its key
// is still computed, and a deep value that is not a cycle keys by its content: the key
// never recurses without end (a stack overflow kills the process; it cannot be recovered).
func TestKeyCyclicAndDeepExtra(t *testing.T) {
	loop := map[string]any{"a": 1}
	loop["self"] = loop
	list := []any{1, nil}
	list[1] = list
	for name, extra := range map[string]any{"map": loop, "slice": list} {
		r := fullRequest()
		r.Extra["cycle"] = extra
		k := key(r)
		assert.Len(t, k, 64, name)
		assert.NotEqual(t, key(fullRequest()), k, name)
		_, err := json.Marshal(r.Extra)
		assert.Error(t, err, "no adapter can send it")
	}
	deep := func(depth int, leaf any) map[string]any {
		v := map[string]any{"leaf": leaf}
		for range depth {
			v = map[string]any{"next": v}
		}
		return v
	}
	a, b := fullRequest(), fullRequest()
	a.Extra["deep"], b.Extra["deep"] = deep(5000, 1), deep(5000, 2)
	assert.NotEqual(t, key(a), key(b), "deep values that differ at the bottom")
	b.Extra["deep"] = deep(5000, 1.0)
	assert.Equal(t, key(a), key(b), "and are one value when they are")
}

// FuzzKeyJSON: JSON documents in a request key by their content: insignificant whitespace
// never changes a tool's parameters' key, two documents that differ once compacted never
// share one, and a JSON value in Extra keys as the value it decodes to.
func FuzzKeyJSON(f *testing.F) {
	f.Add([]byte(`{"type": "object", "properties": {"q": {"type": "integer"}}}`), []byte(`{"type":"object"}`))
	f.Add([]byte(` [1, 2.0, "a b", {"c" : null}] `), []byte(`[1,2,"a b",{"c":null}]`))
	f.Add([]byte(`"\" \\ "`), []byte(`"\"\\"`))
	f.Add([]byte(`12345678901234567891`), []byte(`1e3`))
	withParams := func(raw []byte) string {
		r := fullRequest()
		r.Tools[0].Parameters = raw
		return key(r)
	}
	withExtra := func(v any) string {
		r := fullRequest()
		r.Extra["x"] = v
		return key(r)
	}
	compact := func(t *testing.T, raw []byte) []byte {
		var b bytes.Buffer
		require.NoError(t, json.Compact(&b, raw))
		return b.Bytes()
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ka := withParams(a) // never panics, whatever the bytes
		_ = withExtra(json.RawMessage(a))
		if !json.Valid(a) {
			return
		}
		ca := compact(t, a)
		assert.Equal(t, ka, withParams(ca), "whitespace is insignificant")
		d := json.NewDecoder(bytes.NewReader(a))
		d.UseNumber()
		var v any
		require.NoError(t, d.Decode(&v))
		assert.Equal(t, withExtra(v), withExtra(json.RawMessage(a)), "a JSON value keys as what it decodes to")
		if json.Valid(b) {
			cb := compact(t, b)
			assert.Equal(t, bytes.Equal(ca, cb), ka == withParams(b), "%s and %s", ca, cb)
		}
	})
}
