package gemini

import "testing"

// FuzzParseResponse: any body decodes to a response or an error, never a panic, and the
// input and output counts the adapter adds up never wrap: each is the saturated sum of
// its parts, or -1 when one of them cannot be a count (negative, or no number), which the
// Client takes as no report.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3,"thoughtsTokenCount":2}}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}]}`,
		`{"usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":9223372036854775807,"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":5}}`,
		`{"usageMetadata":{"promptTokenCount":-1,"candidatesTokenCount":-9223372036854775808}}`,
		`{"usageMetadata":{"promptTokenCount":5.7,"candidatesTokenCount":"x","thoughtsTokenCount":1e400,"totalTokenCount":-0.5}}`,
		`{"promptFeedback":{"blockReason":"SAFETY"}}`,
		`[{"candidates":[]}]`,
		`<html>`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		resp, err := parseResponse(200, []byte(body), 0)
		if (resp == nil) == (err == nil) {
			t.Fatalf("want exactly one of response and error: %v, %v", resp, err)
		}
		if resp == nil {
			return
		}
		if u := resp.Usage; u.InputTokens < -1 || u.OutputTokens < -1 {
			t.Fatalf("usage %+v", u)
		}
	})
}
