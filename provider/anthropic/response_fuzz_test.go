package anthropic

import "testing"

// FuzzParseResponse: any body decodes to a response or an error, never a panic, and a
// response's token counts never wrap, however large the reported ones: the input is the
// saturated sum of its parts, or -1 when one of them cannot be a count (negative, or no
// number), which the Client takes as no report; the total and the one-hour writes are
// never negative.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"m","model":"claude","content":[{"type":"text","text":"Hi"},{"type":"thinking","thinking":"t"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":2000,"cache_creation_input_tokens":100,"output_tokens":6}}`,
		`{"content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}],"stop_reason":"tool_use"}`,
		`{"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":9223372036854775807}}`,
		`{"usage":{"input_tokens":-9223372036854775808,"output_tokens":-1}}`,
		`{"content":null,"usage":null}`,
		`{"usage":{"input_tokens":1,"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens":2}}`,
		`{"usage":{"cache_creation_input_tokens":-5,"cache_creation":{"ephemeral_1h_input_tokens":9223372036854775807}}}`,
		`{"usage":{"input_tokens":5.7,"cache_read_input_tokens":"x","output_tokens":1e18,"cache_creation":{"ephemeral_1h_input_tokens":-0.5}}}`,
		`<html>`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		resp, err := parseResponse([]byte(body))
		if (resp == nil) == (err == nil) {
			t.Fatalf("want exactly one of response and error: %v, %v", resp, err)
		}
		if resp == nil {
			return
		}
		if u := resp.Usage; u.InputTokens < -1 || u.TotalTokens < 0 || u.TotalTokens < u.InputTokens ||
			u.CacheWrite1hTokens < 0 || u.CacheWrite1hTokens > max(u.CacheWriteTokens, 0) {
			t.Fatalf("usage %+v", u)
		}
	})
}
