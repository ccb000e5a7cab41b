package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The walkthrough runs against its simulators and shows each step's outcome.
func TestWalkthrough(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"HTTP 200  upstream=openai-sim attempts=2",
		"Hello from the OpenAI simulator.",
		"upstream=anthropic-sim",
		"data: [DONE]",
		"event: message_stop",
		`"code":"model_not_allowed"`,
		"HTTP 401",
		`"ok": true`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
