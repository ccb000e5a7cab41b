package specs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
)

// capture is an http.RoundTripper that records the request body and answers 400, so that
// a test sees exactly what an adapter would send without any network.
type capture struct {
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, body)
	c.paths = append(c.paths, r.URL.Path)
	c.mu.Unlock()
	return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"message":"capture","type":"invalid_request_error"}}`)), Request: r}, nil
}

// last returns the only request captured, or nil when none was.
func (c *capture) last() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		return nil
	}
	return c.bodies[len(c.bodies)-1]
}

// vendor renders requests with one adapter.
type vendor struct {
	name string
	op   func(stream bool) Op
	new  func(hc *http.Client) (llmclient.Provider, error)
}

const base = "http://specs.invalid"

func vendors() []vendor {
	return []vendor{
		{"openai", func(bool) Op { return OpChatCompletions }, func(hc *http.Client) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL(base+"/v1"), openai.WithHTTPClient(hc), openai.WithAPIKey("sk-test"))
		}},
		{"openai_responses", func(bool) Op { return OpResponses }, func(hc *http.Client) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL(base+"/v1"), openai.WithHTTPClient(hc), openai.WithAPIKey("sk-test"), openai.WithResponsesAPI())
		}},
		{"anthropic", func(bool) Op { return OpMessages }, func(hc *http.Client) (llmclient.Provider, error) {
			return anthropic.New(anthropic.WithBaseURL(base), anthropic.WithHTTPClient(hc), anthropic.WithAPIKey("sk-ant-test"))
		}},
		{"gemini", func(stream bool) Op {
			if stream {
				return OpStreamGenerateContent
			}
			return OpGenerateContent
		}, func(hc *http.Client) (llmclient.Provider, error) {
			return gemini.New(gemini.WithBaseURL(base), gemini.WithHTTPClient(hc), gemini.WithAPIKey("AIza-test"))
		}},
	}
}

// outcome is what an adapter did with a request.
type outcome struct {
	body    []byte // the body sent; nil when nothing was sent
	err     error  // the adapter's error (a capture answers 400, so a sent request fails too)
	refused bool   // nothing was sent and err wraps llmclient.ErrUnsupported
	notes   []string
}

// render sends req through the vendor's adapter and captures what went out.
func render(t *testing.T, v vendor, req *llmclient.Request, stream bool) outcome {
	t.Helper()
	c := &capture{}
	p, err := v.new(&http.Client{Transport: c})
	if err != nil {
		t.Fatal(err)
	}
	call := &llmclient.Call{Request: req, Model: req.Model}
	if stream {
		var s llmclient.ProviderStream
		s, err = p.Stream(context.Background(), call)
		if s != nil {
			s.Close()
		}
	} else {
		_, err = p.Complete(context.Background(), call)
	}
	o := outcome{body: c.last(), err: err, notes: call.Notes}
	o.refused = o.body == nil && errors.Is(err, llmclient.ErrUnsupported)
	return o
}

// png is the start of a PNG file, enough for content sniffing.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDRfake")

var weatherTool = llmclient.Tool{
	Name:        "get_weather",
	Description: "Current weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// Tool-call ids as each vendor writes them.
const (
	// geminiSignedID is what provider/gemini makes of a Gemini 3 call with a thought
	// signature (base64, with "/" and "=").
	geminiSignedID = "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlIG9mIGEgdGhvdWdodA+/w=="
	// compatID is the id style of OpenAI-compatible servers such as Kimi's.
	compatID    = "functions.get_weather:0"
	openaiID    = "call_Qp4tZkM9vX2bLw8nRj5sYc1d"
	anthropicID = "toolu_01A09q90qw90lq917835lq9"
)

// toolTurn is an assistant turn calling get_weather for each id, with a text result each.
func toolTurn(ids ...string) []llmclient.Message {
	calls := make([]llmclient.ToolCall, len(ids))
	for i, id := range ids {
		calls[i] = llmclient.ToolCall{ID: id, Name: "get_weather", Arguments: `{"city":"Paris"}`}
	}
	msgs := []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: calls}}
	for _, id := range ids {
		msgs = append(msgs, llmclient.ToolResultMessage(id, `{"temp_c":18}`))
	}
	return msgs
}

// conversationCase is one request that a conversation begun elsewhere leads to.
type conversationCase struct {
	name string
	req  llmclient.Request
	// refusedBy lists the vendors that must refuse the request locally (ErrUnsupported,
	// nothing sent); every other vendor must send a body its spec accepts.
	refusedBy []string
	// notes maps a vendor to a text one of its translation notes must contain.
	notes map[string]string
}

func conversations() []conversationCase {
	user := llmclient.UserMessage("What is the weather in Paris?")
	conv := func(msgs ...llmclient.Message) llmclient.Request {
		return llmclient.Request{Model: "m", Tools: []llmclient.Tool{weatherTool},
			Messages: append([]llmclient.Message{llmclient.SystemMessage("You are a weather bot."), user}, msgs...)}
	}
	then := llmclient.UserMessage("And tomorrow?")
	imageResult := llmclient.Message{Role: llmclient.RoleTool, ToolCallID: openaiID, Content: []llmclient.Part{
		llmclient.TextPart("Radar picture:"), llmclient.ImageDataPart("image/png", png)}}
	imageOnlyResult := llmclient.Message{Role: llmclient.RoleTool, ToolCallID: anthropicID, Content: []llmclient.Part{
		llmclient.ImageURLPart("https://example.com/radar.png")}}

	full := conv(append(append(toolTurn(geminiSignedID, "call_1"),
		llmclient.AssistantMessage("It is 18°C in Paris."),
		llmclient.Message{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("Look:"), llmclient.ImageDataPart("image/png", png)}}),
		toolTurn(compatID)...)...)
	full.Messages = append(full.Messages, then)
	full.Messages[0].Content = append(full.Messages[0].Content, llmclient.ImageURLPart("https://example.com/logo.png"))
	full.Temperature = llmclient.Float(1.5)
	full.Stop = []string{"a", "b", "c", "d", "e"}

	return []conversationCase{
		{name: "begun_on_gemini_signed_ids", notes: map[string]string{"openai": "at most 40", "anthropic": "lcid_"}, req: conv(append(toolTurn(geminiSignedID, "call_1"), then)...)},
		{name: "begun_on_openai_compatible_ids", notes: map[string]string{"anthropic": "lcid_"}, req: conv(append(toolTurn(compatID), then)...)},
		{name: "begun_on_openai", req: conv(append(toolTurn(openaiID), then)...)},
		{name: "begun_on_anthropic", req: conv(append(toolTurn(anthropicID), then)...)},
		{name: "image_in_system", notes: map[string]string{"openai": "system message", "openai_responses": "system message", "anthropic": "system prompt", "gemini": "system prompt"}, req: func() llmclient.Request {
			r := conv(then)
			r.Messages[0].Content = append(r.Messages[0].Content, llmclient.ImageDataPart("image/png", png))
			return r
		}()},
		{name: "image_in_tool_result", notes: map[string]string{"openai": "tool message", "gemini": "tool result"}, req: conv(
			llmclient.Message{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
				{ID: openaiID, Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: anthropicID, Name: "get_weather", Arguments: `{"city":"Rome"}`}}},
			imageResult, imageOnlyResult, then)},
		{name: "image_in_assistant", refusedBy: []string{"openai", "openai_responses"}, req: conv(
			llmclient.Message{Role: llmclient.RoleAssistant, Content: []llmclient.Part{
				llmclient.TextPart("Here is the map:"), llmclient.ImageDataPart("image/png", png)}}, then)},
		{name: "temperature_1_5", notes: map[string]string{"anthropic": "temperature 1.5 lowered to the maximum 1"}, req: func() llmclient.Request {
			r := conv(then)
			r.Temperature, r.TopP = llmclient.Float(1.5), llmclient.Float(0.9)
			return r
		}()},
		// The Responses API has no stop sequences.
		{name: "five_stop_sequences", refusedBy: []string{"openai_responses"}, notes: map[string]string{"openai": "first 4 of 5 stop sequences"}, req: func() llmclient.Request {
			r := conv(then)
			r.Stop = []string{"1", "2", "3", "4", "5"}
			return r
		}()},
		{name: "failed_tool_result", notes: map[string]string{"openai": "error mark not sent", "openai_responses": "error mark not sent"}, req: conv(
			llmclient.Message{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: openaiID, Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			llmclient.Message{Role: llmclient.RoleTool, ToolCallID: openaiID, IsError: true, Content: []llmclient.Part{
				llmclient.TextPart("radar offline:"), llmclient.ImageDataPart("image/png", png)}},
			then)},
		{name: "no_parallel_tool_calls", notes: map[string]string{"gemini": "parallel tool calls not disabled"}, req: func() llmclient.Request {
			r := conv(then)
			r.DisableParallelToolCalls = true
			r.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired}
			return r
		}()},
		{name: "json_object", notes: map[string]string{"anthropic": "json_object not sent"}, req: func() llmclient.Request {
			r := conv(llmclient.UserMessage("Answer in JSON."))
			r.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONObject}
			return r
		}()},
		{name: "everything_at_once", refusedBy: []string{"openai_responses"}, req: full},
		{name: "everything_but_stop_sequences", req: func() llmclient.Request {
			r := full
			r.Stop = nil
			return r
		}()},
	}
}

// TestCrossVendorRequests renders each conversation with each adapter, one-shot and
// streaming: the adapter either sends a body that the vendor's spec and rules accept, or
// refuses the call locally, before sending anything, with an error wrapping
// llmclient.ErrUnsupported.
func TestCrossVendorRequests(t *testing.T) {
	v := specs(t)
	for _, cv := range conversations() {
		for _, vd := range vendors() {
			for _, stream := range []bool{false, true} {
				name := cv.name + "/" + vd.name
				if stream {
					name += "/stream"
				}
				t.Run(name, func(t *testing.T) {
					req := cv.req
					o := render(t, vd, &req, stream)
					wantRefusal := false
					for _, r := range cv.refusedBy {
						wantRefusal = wantRefusal || r == vd.name
					}
					switch {
					case wantRefusal && o.refused:
						if msg := o.err.Error(); !strings.Contains(msg, strings.TrimSuffix(vd.name, "_responses")+": ") {
							t.Errorf("refusal %q does not name the adapter", msg)
						}
						return
					case wantRefusal:
						t.Fatalf("want a local refusal wrapping ErrUnsupported; sent %d bytes, err %v", len(o.body), o.err)
					case o.body == nil:
						t.Fatalf("nothing sent: %v", o.err)
					}
					if err := v.validate(vd.op(stream), o.body); err != nil {
						t.Errorf("%s rejects the body:\n%v\nbody: %s", vd.op(stream), err, o.body)
					}
					for _, p := range checkRules(vd.op(stream), o.body) {
						t.Errorf("%s\nbody: %s", p, o.body)
					}
					if want, ok := cv.notes[vd.name]; ok && !strings.Contains(strings.Join(o.notes, "\n"), want) {
						t.Errorf("no translation note mentions %q; notes: %q", want, o.notes)
					}
				})
			}
		}
	}
}

// embedVendor renders embedding requests with one adapter.
type embedVendor struct {
	name string
	op   func(inputs int) Op
	new  func(hc *http.Client) (llmclient.Embedder, error)
}

func embedVendors() []embedVendor {
	return []embedVendor{
		{"openai", func(int) Op { return OpEmbeddings }, func(hc *http.Client) (llmclient.Embedder, error) {
			return openai.New(openai.WithBaseURL(base+"/v1"), openai.WithHTTPClient(hc), openai.WithAPIKey("sk-test"))
		}},
		{"gemini", func(n int) Op {
			if n == 1 {
				return OpEmbedContent
			}
			return OpBatchEmbedContents
		}, func(hc *http.Client) (llmclient.Embedder, error) {
			return gemini.New(gemini.WithBaseURL(base), gemini.WithHTTPClient(hc), gemini.WithAPIKey("AIza-test"))
		}},
	}
}

// TestEmbedRequests renders embedding requests (one input, a full batch, dimensions, a
// task type) with each adapter and validates them against the vendor's spec.
func TestEmbedRequests(t *testing.T) {
	v := specs(t)
	batch := make([]string, 0, 64)
	for i := range cap(batch) {
		batch = append(batch, "document "+strings.Repeat("x", i))
	}
	reqs := map[string]llmclient.EmbedRequest{
		"one":        {Model: "embed-model", Input: []string{"What is a quaternion?"}},
		"batch":      {Model: "embed-model", Input: batch},
		"dimensions": {Model: "embed-model", Input: []string{"a", "b"}, Dimensions: 256, TaskType: "RETRIEVAL_DOCUMENT"},
	}
	for name, req := range reqs {
		for _, ev := range embedVendors() {
			t.Run(name+"/"+ev.name, func(t *testing.T) {
				c := &capture{}
				e, err := ev.new(&http.Client{Transport: c})
				if err != nil {
					t.Fatal(err)
				}
				r := req
				_, err = e.Embed(context.Background(), &llmclient.EmbedCall{Model: r.Model, Request: &r})
				body := c.last()
				if body == nil {
					t.Fatalf("nothing sent: %v", err)
				}
				if err := v.validate(ev.op(len(r.Input)), body); err != nil {
					t.Errorf("%s rejects the body:\n%v\nbody: %s", ev.op(len(r.Input)), err, body)
				}
			})
		}
	}
}
