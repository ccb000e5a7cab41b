package llmclient

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient/internal/httpx"
)

// FuzzDecodeBodies feeds the transport's decoders of encoded bodies (an error body, a
// one-shot body for its usage, a stream for its guard) arbitrary bytes under each
// encoding: no panic, a decoded size within its limit, and a body that encodes data
// decodes back to it.
func FuzzDecodeBodies(f *testing.F) {
	encode := func(enc string, data []byte) []byte {
		var z bytes.Buffer
		var w io.WriteCloser
		switch enc {
		case "gzip":
			w = gzip.NewWriter(&z)
		case "deflate":
			w = zlib.NewWriter(&z)
		default:
			w, _ = flate.NewWriter(&z, flate.DefaultCompression)
		}
		_, _ = w.Write(data)
		_ = w.Close()
		return z.Bytes()
	}
	for _, enc := range []string{"gzip", "deflate", "raw", ""} {
		for _, s := range []string{"", "x", `{"error":{"message":"busy"}}`, "data: {}\n\n", string(make([]byte, 5000))} {
			f.Add(enc, []byte(s), true)
			f.Add(enc, encode(enc, []byte(s)), false)
		}
	}
	f.Add("gzip", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"), false)
	f.Add("deflate", []byte("\x78\x9c"), false)
	f.Add("deflate", []byte("\x78"), false)
	const limit = 4 << 10
	f.Fuzz(func(t *testing.T, enc string, data []byte, wrap bool) {
		header := "deflate"
		if enc == "gzip" {
			header = "gzip"
		}
		body := data
		if wrap {
			body = encode(enc, data)
		}
		resp := func() *http.Response {
			return &http.Response{Header: http.Header{"Content-Encoding": {header}}, Body: io.NopCloser(bytes.NewReader(body))}
		}
		got, decoded, _ := readErrorBody(resp())
		if len(got) > httpx.MaxErrorBody {
			t.Fatalf("error body of %d bytes", len(got))
		}
		usage := decodedUsageBody(resp(), header, body, limit)
		if len(usage) > limit {
			t.Fatalf("usage body of %d bytes", len(usage))
		}
		if wrap && (enc == header || enc == "raw") && len(data) <= limit {
			if !decoded || !bytes.Equal(got, data) {
				t.Fatalf("error body decoded %v to %q, want %q", decoded, got, data)
			}
			if !bytes.Equal(usage, data) && !(len(data) == 0 && len(usage) == 0) {
				t.Fatalf("usage body %q, want %q", usage, data)
			}
		}
		view := resp()
		rec := &recorder{r: view.Body}
		if _, err := decodeView(view, rec); err == nil {
			out, _ := httpx.ReadLimited(view.Body, limit)
			if wrap && (enc == header || enc == "raw") && len(data) <= limit && !bytes.Equal(out, data) && len(data) > 0 {
				t.Fatalf("stream decoded to %q, want %q", out, data)
			}
		}
	})
}

// FuzzInBandError compares inBandError with a reading of the body's first member by
// encoding/json, for valid JSON without escapes in its first bytes.
func FuzzInBandError(f *testing.F) {
	for _, s := range []string{`{"error":{"message":"x"}}`, ` { "error" : "boom" }`, `{"error":null}`, `{"type":"error","error":{}}`,
		`{"object":"error","message":"x"}`, `{"id":"c1","error":{}}`, `[{"error":{}}]`, `{"type":"message"}`, `{"error"`, `{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := inBandError(data)
		if !json.Valid(data) || bytes.IndexByte(data[:min(len(data), 64)], '\\') >= 0 {
			return
		}
		d := json.NewDecoder(bytes.NewReader(data))
		want := func() bool {
			if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
				return false
			}
			key, err := d.Token()
			if err != nil {
				return false
			}
			val, err := d.Token()
			if err != nil {
				return false
			}
			switch key {
			case "error":
				_, str := val.(string)
				return val == json.Delim('{') || str
			case "type", "object":
				return val == "error"
			}
			return false
		}()
		if got != want {
			t.Fatalf("inBandError(%q) = %v, want %v", data, got, want)
		}
	})
}
