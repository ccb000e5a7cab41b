package providertest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	estimatepkg "github.com/llmclient/llmclient/estimate"
)

// UserCall is a call of model whose request is msgs.
func UserCall(model string, msgs ...llmclient.Message) *llmclient.Call {
	return &llmclient.Call{Model: model, Request: &llmclient.Request{Model: model, Messages: msgs}}
}

// Conversation is a benchmark request: a system prompt, five user/assistant turns of about
// 50 words each, and one tool.
func Conversation() *llmclient.Request {
	req := &llmclient.Request{Tools: []llmclient.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`)}}}
	req.Messages = append(req.Messages, llmclient.SystemMessage("You are terse."))
	for range 5 {
		req.Messages = append(req.Messages, llmclient.UserMessage(strings.Repeat("question ", 50)), llmclient.AssistantMessage(strings.Repeat("answer ", 50)))
	}
	return req
}

// Estimator is an estimate.Estimator that counts one token per text and records every
// text it is asked about. The zero value is ready; it is safe for concurrent use.
type Estimator struct {
	mu    sync.Mutex
	texts []string
}

// CountTokens records text and returns 1.
func (e *Estimator) CountTokens(_, text string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.texts = append(e.texts, text)
	return 1
}

// Texts returns a copy of the texts counted so far, in order.
func (e *Estimator) Texts() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.texts...)
}

// Counted reports whether text was counted, as a whole.
func (e *Estimator) Counted(text string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.texts, text)
}

// CountedPart reports whether some counted text contains sub.
func (e *Estimator) CountedPart(sub string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.texts {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// CheckCounted runs estimate, an adapter's EstimateBodyTokens, on the body in
// testdata/name with an Estimator, and checks that it counted each of texts whole and,
// for each of parts, some text containing it.
func CheckCounted(t testing.TB, estimate func([]byte, estimatepkg.Estimator) (int, error), name string, texts, parts []string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rec Estimator
	if _, err := estimate(body, &rec); err != nil {
		t.Fatal(err)
	}
	for _, want := range texts {
		if !rec.Counted(want) {
			t.Errorf("estimate did not count %q; counted %q", want, rec.Texts())
		}
	}
	for _, part := range parts {
		if !rec.CountedPart(part) {
			t.Errorf("estimate counted no text with %s", part)
		}
	}
}
