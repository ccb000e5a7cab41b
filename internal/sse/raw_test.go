package sse_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmclient/llmclient/internal/sse"
)

// rawEv is an Event with its Data copied, and whether it was a raw JSON value.
type rawEv struct {
	ev
	Raw bool
}

// collectRaw decodes r with AcceptRawJSON to the end.
func collectRaw(r io.Reader, limit int) ([]rawEv, error) {
	d := sse.NewDecoder(r, limit)
	d.AcceptRawJSON()
	var out []rawEv
	for {
		e, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rawEv{ev{Type: e.Type, Data: string(e.Data), ID: e.ID, Retry: e.Retry, Comment: e.Comment}, e.Raw})
	}
}

func TestDecoderRawJSON(t *testing.T) {
	gemini429 := "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Resource exhausted {\\\"quota\\\"]\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n"
	tests := []struct {
		name string
		in   string
		want []rawEv
	}{
		{"one line after data", "data: {\"a\":1}\n\n{\"error\":{\"code\":500}}\n",
			[]rawEv{{ev: ev{Data: `{"a":1}`}}, {ev: ev{Data: `{"error":{"code":500}}`}, Raw: true}}},
		{"pretty-printed over lines, brackets in strings", "data: x\n\n" + gemini429,
			[]rawEv{{ev: ev{Data: "x"}}, {ev: ev{Data: strings.TrimSuffix(gemini429, "\n")}, Raw: true}}},
		{"array", "[{\"error\":{}}]\ndata: y\n\n",
			[]rawEv{{ev: ev{Data: `[{"error":{}}]`}, Raw: true}, {ev: ev{Data: "y"}}}},
		{"cut short", "{\"error\":{\"code\":",
			[]rawEv{{ev: ev{Data: `{"error":{"code":`}, Raw: true}}},
		{"not at an event start", "data: a\n{\"x\":1}\n\n",
			[]rawEv{{ev: ev{Data: "a"}}}},
		{"an event type before it is dropped", "event: e\n{}\ndata: b\n\n",
			[]rawEv{{ev: ev{Data: "{}"}, Raw: true}, {ev: ev{Data: "b"}}}},
	}
	for _, tt := range tests {
		for name, r := range readers(tt.in) {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				got, err := collectRaw(r, 0)
				if err != nil && !errors.Is(err, iotest.ErrTimeout) {
					t.Fatal(err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("events %+v, want %+v", got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Errorf("event %d = %+v, want %+v", i, got[i], tt.want[i])
					}
				}
			})
		}
	}
	// Without AcceptRawJSON the line is a field with an unknown name, ignored.
	if got, err := collect(strings.NewReader("{\"error\":{}}\ndata: z\n\n"), 0); err != nil || len(got) != 1 || got[0].Data != "z" {
		t.Errorf("default decoder: %+v, %v", got, err)
	}
}

func TestDecoderRawJSONLimit(t *testing.T) {
	in := "{\n" + strings.Repeat("  \"k\": 1,\n", 100) + "}\n"
	_, err := collectRaw(strings.NewReader(in), 64)
	if !errors.Is(err, sse.ErrEventTooLarge) {
		t.Errorf("err = %v, want ErrEventTooLarge", err)
	}
}

// FuzzDecoderRawJSON checks the raw mode: no panic, the limit holds, raw values start with
// a bracket, and how the input is split into reads changes nothing.
func FuzzDecoderRawJSON(f *testing.F) {
	for _, s := range []string{
		"{\"error\":{\"code\":429}}\n",
		"data: a\n\n{\n \"error\": \"}\\\"{\"\n}\ndata: b\n\n",
		"[[[[\n]]\n",
		"{\"a\":\"\\\\\"}\n",
		"event: x\n[\ndata: 1\n\n",
	} {
		f.Add([]byte(s), uint8(2), uint16(0))
		f.Add([]byte(s), uint8(5), uint16(16))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, limit uint16) {
		lim := int(limit)
		want, wantErr := collectRaw(bytes.NewReader(in), lim)
		effective := lim
		if effective <= 0 {
			effective = sse.DefaultMaxEventSize
		}
		for _, e := range want {
			if len(e.Data) > effective {
				t.Fatalf("data of %d bytes over the limit %d", len(e.Data), effective)
			}
			if e.Raw && (e.Data == "" || e.Data[0] != '{' && e.Data[0] != '[' || e.Type != "" || e.Comment) {
				t.Fatalf("bad raw event %+v", e)
			}
		}
		if wantErr != nil && !errors.Is(wantErr, sse.ErrEventTooLarge) {
			t.Fatalf("unexpected error %v", wantErr)
		}
		for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(in)), &chunkReader{b: in, n: int(chunk)%16 + 1}} {
			got, err := collectRaw(r, lim)
			if len(got) != len(want) || (err == nil) != (wantErr == nil) {
				t.Fatalf("split reads: %+v, %v; want %+v, %v", got, err, want, wantErr)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("split reads: event %d = %+v, want %+v", i, got[i], want[i])
				}
			}
		}
	})
}
