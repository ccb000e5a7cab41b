package sse_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/llmclient/llmclient/internal/sse"
)

// FuzzDecoder checks that the decoder never panics, respects its limit, never returns line
// endings inside a field, and that how the input is split into reads does not change the
// events or the final error.
func FuzzDecoder(f *testing.F) {
	seeds := []string{
		"data: hello\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		"data: a\rdata: b\r\r",
		"\xEF\xBB\xBFevent: x\nid: 1\nretry: 10\ndata: y\n\n",
		": keep-alive\n\ndata: {\"choices\":[]}\n\ndata: [DONE]\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n",
		"id: a\x00b\ndata\ndata:\n\n",
		"data: unterminated",
		"data: " + string(bytes.Repeat([]byte("x"), 100)) + "\n\n",
		"\r\n\r\r\n\n:\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(0), uint16(0))
		f.Add([]byte(s), uint8(3), uint16(40))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, limit uint16) {
		lim := int(limit)
		want, wantErr := collect(bytes.NewReader(in), lim)
		effective := lim
		if effective <= 0 {
			effective = sse.DefaultMaxEventSize
		}
		for _, e := range want {
			if len(e.Data) > effective {
				t.Fatalf("data of %d bytes over the limit %d", len(e.Data), effective)
			}
			if !e.Comment && bytes.ContainsAny([]byte(e.Data), "\r") {
				t.Fatalf("CR in data %q", e.Data)
			}
			if bytes.ContainsAny([]byte(e.Type+e.ID), "\r\n") || bytes.IndexByte([]byte(e.ID), 0) >= 0 {
				t.Fatalf("bad type %q or id %q", e.Type, e.ID)
			}
			if e.Comment && bytes.ContainsAny([]byte(e.Data), "\r\n") {
				t.Fatalf("line ending in comment %q", e.Data)
			}
		}
		if wantErr != nil && !errors.Is(wantErr, sse.ErrEventTooLarge) {
			t.Fatalf("unexpected error %v", wantErr)
		}
		others := []struct {
			name string
			r    io.Reader
		}{
			{"onebyte", iotest.OneByteReader(bytes.NewReader(in))},
			{"chunked", &chunkReader{b: in, n: int(chunk)%16 + 1}},
		}
		for _, o := range others {
			got, err := collect(o.r, lim)
			if !equalEvents(got, want) {
				t.Fatalf("%s: events differ\n got %+v\nwant %+v", o.name, got, want)
			}
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("%s: error %v, want %v", o.name, err, wantErr)
			}
		}
	})
}
