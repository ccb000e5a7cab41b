package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
)

// The conversation RunConversation carries from one vendor to another.
const (
	convSystem    = "You are a weather bot. Answer briefly."
	convSignature = "c2lnLWNmLTE=" // base64 of "sig-cf-1", like a real thought signature
)

// convResults are the tool results the caller sends after the first turn: the second one
// carries an image.
var convResults = []string{`{"temp_c":18}`, `{"temp_c":24}`}

// convPNG is the start of a PNG file, enough for content sniffing.
var convPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDRconformance")

// RunConversation checks that a conversation begun on one vendor can be continued on
// each of the others and back: for every ordered pair (A, B) of the Wire targets, turn 1
// goes to A (a system prompt, a tool, a user message with an image) and A answers with
// two tool calls, in A's id style (and A's signature for a vendor that SignsToolCalls);
// the caller appends the calls and their results (one with an image) and turn 2 goes to B,
// which answers with text; the caller adds a user message and turn 3 goes back to A.
//
// Each upstream must receive the conversation in its own format: the model, the
// credential, the declared tool, the system prompt, both images, the two calls replayed
// with their names and arguments, and each result linked to one of them; in turn 3, A
// must get its signature back. The subtests are "<A>_then_<B>/complete" and
// ".../stream". Script targets are skipped: they make no HTTP calls to decode.
func RunConversation(t *testing.T, targets ...Target) {
	t.Helper()
	var wires []*Target
	for i := range targets {
		if err := targets[i].validate(); err != nil {
			t.Fatal(err)
		}
		if targets[i].Wire != nil {
			wires = append(wires, &targets[i])
		}
	}
	if len(wires) < 2 {
		t.Fatal("conformance: RunConversation needs at least two Wire targets")
	}
	for _, a := range wires {
		for _, b := range wires {
			if a == b {
				continue
			}
			for _, stream := range []bool{false, true} {
				mode := "complete"
				if stream {
					mode = "stream"
				}
				t.Run(a.Name+"_then_"+b.Name+"/"+mode, func(t *testing.T) {
					for _, p := range runConversation(a, b, stream) {
						t.Error(p)
					}
				})
			}
		}
	}
}

// convTurn1 is the first request of the conversation.
func convTurn1() *llmclient.Request {
	return &llmclient.Request{
		Model: Model,
		Messages: []llmclient.Message{
			llmclient.SystemMessage(convSystem),
			{Role: llmclient.RoleUser, Content: []llmclient.Part{
				llmclient.TextPart("What is the weather in Paris and in Rome? Here is my window:"),
				llmclient.ImageDataPart("image/png", convPNG)}},
		},
		Tools: []llmclient.Tool{{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
	}
}

func runConversation(a, b *Target, stream bool) []string {
	usage := llmclient.Usage{InputTokens: 40, OutputTokens: 12, TotalTokens: 52}
	calls := []llmclient.ToolCall{
		{ID: "call_cv1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "call_cv2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
	}
	answer := Reply{Text: []string{"Paris 18°C,", " Rome 24°C."}, Finish: finish.Stop, Usage: usage}
	envA, err := newEnv(a, stream, []Reply{
		{ToolCalls: calls, Finish: finish.ToolCalls, Usage: usage, Signature: convSignature},
		{Text: []string{"Tomorrow: sunny."}, Finish: finish.Stop, Usage: usage},
	}, false)
	if err != nil {
		return []string{err.Error()}
	}
	defer envA.close()
	envB, err := newEnv(b, stream, []Reply{answer}, false)
	if err != nil {
		return []string{err.Error()}
	}
	defer envB.close()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var p problems
	turn := func(e *env, tg *Target, req *llmclient.Request, n int) *llmclient.Response {
		call := &llmclient.Call{Request: req, Model: req.Model}
		r := callProvider(ctx, e.provider, call, stream)
		if r.err != nil || r.resp == nil {
			p.add("turn %d (%s): %v", n, tg.Name, r.err)
			return nil
		}
		return r.resp
	}

	// Turn 1, on A.
	req := convTurn1()
	first := turn(envA, a, req, 1)
	if first == nil {
		return p
	}
	checkToolCalls(&p, "turn 1 ("+a.Name+"): tool calls", first.ToolCalls, calls, true)
	if len(first.ToolCalls) != len(calls) {
		return p
	}
	next := cloneRequest(req)
	next.Messages = append(next.Messages, llmclient.Message{Role: llmclient.RoleAssistant, ToolCalls: slices.Clone(first.ToolCalls)})
	next.Messages = append(next.Messages, llmclient.ToolResultMessage(first.ToolCalls[0].ID, convResults[0]))
	next.Messages = append(next.Messages, llmclient.Message{Role: llmclient.RoleTool, ToolCallID: first.ToolCalls[1].ID,
		Content: []llmclient.Part{llmclient.TextPart(convResults[1]), llmclient.ImageURLPart("https://example.com/rome-radar.png")}})

	// Turn 2, on B.
	second := turn(envB, b, next, 2)
	if second == nil {
		return p
	}
	if want := strings.Join(answer.Text, ""); second.Text != want {
		p.add("turn 2 (%s): Text = %q, want %q", b.Name, second.Text, want)
	}
	checkConversationSeen(&p, "turn 2 ("+b.Name+")", envB.up.exchanges(), 0, next, calls)

	// Turn 3, back on A.
	third := cloneRequest(next)
	third.Messages = append(third.Messages, llmclient.AssistantMessage(second.Text), llmclient.UserMessage("And tomorrow?"))
	if turn(envA, a, third, 3) == nil {
		return p
	}
	log := envA.up.exchanges()
	checkConversationSeen(&p, "turn 3 ("+a.Name+")", log, 1, third, calls)
	if a.SignsToolCalls && len(log) > 1 && log[1].seen != nil && !slices.Contains(log[1].seen.Signatures, convSignature) {
		p.add("turn 3 (%s): the signature %q of A's own tool call did not come back (signatures %q)", a.Name, convSignature, log[1].seen.Signatures)
	}
	p = append(p, envA.up.report(true)...)
	p = append(p, envB.up.report(true)...)
	return p
}

// checkConversationSeen checks what an upstream received in turn n of the conversation:
// log[i] is that call.
func checkConversationSeen(p *problems, what string, log []exchange, i int, req *llmclient.Request, calls []llmclient.ToolCall) {
	if i >= len(log) || log[i].seen == nil {
		p.add("%s: the upstream received no decodable request", what)
		return
	}
	s := log[i].seen
	var sub problems
	checkSeen(&sub, s, req, apiKey)
	checkToolCalls(&sub, "replayed tool calls", s.ToolCalls, calls, false)
	if !strings.Contains(s.System, convSystem) {
		sub.add("system prompt = %q, want %q", s.System, convSystem)
	}
	if s.Images != 2 { // the user's window and the tool's radar, wherever the adapter put them
		sub.add("the request carried %d images, want 2", s.Images)
	}
	if len(s.ToolResults) != len(calls) {
		sub.add("request carries %d tool results, want %d", len(s.ToolResults), len(calls))
	}
	for j, tr := range s.ToolResults {
		if !slices.ContainsFunc(s.ToolCalls, func(c llmclient.ToolCall) bool { return c.ID == tr.Ref }) {
			sub.add("tool result %d refers to %q, which no replayed tool call has", j, tr.Ref)
		}
		if j < len(convResults) && !sameJSON(tr.Content, convResults[j]) && !strings.Contains(tr.Content, `"temp_c"`) {
			sub.add("tool result %d content = %q, want %s", j, tr.Content, convResults[j])
		}
	}
	for _, s := range sub {
		p.add("%s: %s", what, s)
	}
}
