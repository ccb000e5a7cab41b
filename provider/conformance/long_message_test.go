package conformance_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
)

// TestLongVendorMessageIsCapped checks that every dialect caps the vendor's error message
// it copies into Error.Message (a broken or hostile server can send up to the 1 MiB an
// error body is read to), cutting it at a rune boundary, and still classifies the error
// from what the body says.
func TestLongVendorMessageIsCapped(t *testing.T) {
	long := strings.Repeat("é", 50_000) // 100 KB, two bytes a rune: a cut can split one
	for _, tc := range []struct {
		name     string
		classify func(int, http.Header, []byte) *llmclient.Error
		body     string
		class    failure.Class
	}{
		{"openai", openai.ClassifyError, `{"error":{"message":"` + long + `","type":"server_error","code":null}}`, failure.ServerError},
		{"anthropic", anthropic.ClassifyError, `{"type":"error","error":{"type":"overloaded_error","message":"` + long + `"}}`, failure.Overloaded},
		{"gemini", gemini.ClassifyError, `{"error":{"code":503,"message":"` + long + `","status":"UNAVAILABLE"}}`, failure.Overloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.classify(503, nil, []byte(tc.body))
			if e.Class != tc.class {
				t.Errorf("class %v, want %v", e.Class, tc.class)
			}
			if len(e.Message) > 1024+len("…") || !utf8.ValidString(e.Message) || !strings.HasPrefix(e.Message, "éé") {
				t.Errorf("message of %d bytes (valid UTF-8: %v): %.40q…", len(e.Message), utf8.ValidString(e.Message), e.Message)
			}
		})
	}
}
