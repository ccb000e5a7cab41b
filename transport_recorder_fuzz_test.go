package llmclient

import (
	"bytes"
	"io"
	"testing"
)

// chunkReader returns data in pieces of the given sizes (cycled), then io.EOF.
type chunkReader struct {
	data  []byte
	sizes []byte
	n     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := len(c.data)
	if len(c.sizes) > 0 {
		k = int(c.sizes[c.n%len(c.sizes)]) + 1
		c.n++
	}
	k = min(k, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// eventEnds returns the offsets just after each blank line of an event stream (LF, CR or
// CRLF line endings; the blank line's end at its CR when a CRLF ends it).
func eventEnds(b []byte) []int {
	var out []int
	atLineStart := false
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\r' && c != '\n' {
			atLineStart = false
			i++
			continue
		}
		crlf := c == '\r' && i+1 < len(b) && b[i+1] == '\n'
		if atLineStart {
			out = append(out, i+1)
			atLineStart = false
		} else {
			atLineStart = true
		}
		i++
		if crlf {
			i++
		}
	}
	return out
}

// FuzzRecorderEvents reads a stream through a recorder in event mode, in reads of varied
// sizes: what it hands over is the stream, one event at a time (never past an event's
// end), and what it lets the caller take ends at the events' ends.
func FuzzRecorderEvents(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"), []byte{3, 200}, uint8(7))
	f.Add([]byte("event: x\r\ndata: 1\r\n\r\nevent: y\rdata: 2\r\r: c\n\n"), []byte{0, 5}, uint8(1))
	f.Add([]byte("\n\n\r\n\r\n\r\r"), []byte{}, uint8(2))
	f.Fuzz(func(t *testing.T, data, sizes []byte, psize uint8) {
		rec := &recorder{r: &chunkReader{data: bytes.Clone(data), sizes: sizes}, events: true}
		want := eventEnds(data)
		var handed, taken []byte
		var bounds []int
		next := 0 // the first event end not yet handed over
		p := make([]byte, int(psize)+1)
		for range 4*len(data) + 8 {
			n, err := rec.Read(p)
			got := p[:n]
			for next < len(want) && want[next] <= len(handed) {
				next++
			}
			if next < len(want) && want[next] < len(handed)+n {
				t.Fatalf("a read went past the event end at %d: handed %d..%d", want[next], len(handed), len(handed)+n)
			}
			handed = append(handed, got...)
			if len(bounds) == 0 || bounds[len(bounds)-1] != rec.bound {
				if rec.bound != 0 {
					bounds = append(bounds, rec.bound)
				}
			}
			out := make([]byte, 1+int(psize)%64)
			for {
				k := rec.take(out)
				if k == 0 {
					break
				}
				taken = append(taken, out[:k]...)
			}
			if len(taken) != rec.bound {
				t.Fatalf("taken %d bytes, bound %d", len(taken), rec.bound)
			}
			if err != nil {
				break
			}
		}
		if !bytes.Equal(handed, data) {
			t.Fatalf("handed %q, want %q", handed, data)
		}
		if !bytes.Equal(taken, data[:len(taken)]) {
			t.Fatalf("taken %q is not a prefix of the stream", taken)
		}
		if len(bounds) != len(want) {
			t.Fatalf("event ends %v, want %v", bounds, want)
		}
		for i := range want {
			if bounds[i] != want[i] {
				t.Fatalf("event ends %v, want %v", bounds, want)
			}
		}
	})
}
