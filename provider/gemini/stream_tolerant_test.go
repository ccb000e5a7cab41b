package gemini_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

func gemText(s string) string {
	return `data: {"candidates":[{"content":{"parts":[{"text":"` + s + `"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r-1"}` + "\n\n"
}

const (
	gemBad  = `data: {"candidates":[{"content":{"parts":[{"text":"x` + "\n\n"
	gemStop = `data: {"candidates":[{"content":{"parts":[{"text":"!"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":3,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"r-1"}` + "\n\n"
)

// A chunk that does not parse, between good ones, is skipped and counted; the stream
// completes.
func TestStreamSkipsMalformedEvent(t *testing.T) {
	st := openStream(t, providertest.SSE(gemText("Hel")+gemBad+gemText("lo")+gemStop))
	got, err := providertest.Drain(st)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	providertest.EqualLines(t, got, []string{
		`id=r-1 model=gemini-2.5-flash text="Hel"`, `text="lo"`,
		`text="!" finish=stop(STOP) usage=in:4,out:3,total:7,cached:0,reasoning:0`,
	})
	if n := st.(interface{ SkippedEvents() int }).SkippedEvents(); n != 1 {
		t.Errorf("SkippedEvents() = %d, want 1", n)
	}
}

// Past the bound or before any good chunk, a malformed chunk fails the stream; a skipped
// chunk that may have carried the finish reason leaves the end of the body a cut.
func TestStreamMalformedEventFails(t *testing.T) {
	tests := []struct {
		name, body string
		cut        bool
		message    string
	}{
		{"past the bound", gemText("Hi") + strings.Repeat(gemBad, 9) + gemStop, false, "8 malformed events skipped"},
		{"before any chunk", gemBad + gemText("Hi") + gemStop, false, "malformed stream chunk"},
		{"malformed last chunk", gemText("Hi") + gemStop[:60] + "\n\n", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := providertest.Drain(openStream(t, providertest.SSE(tt.body)))
			if tt.cut {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v, want a cut", err)
				}
				return
			}
			var e *llmclient.Error
			if !errors.As(err, &e) || e.Class != failure.ServerError || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("err = %v (class %v)", err, llmclient.ClassOf(err))
			}
		})
	}
}
