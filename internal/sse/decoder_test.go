package sse_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/internal/sse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ev is an Event with its Data copied out of the decoder's buffer.
type ev struct {
	Type    string
	Data    string
	ID      string
	Retry   time.Duration
	Comment bool
}

// collect decodes r to the end and returns every event and the final error (nil for io.EOF).
func collect(r io.Reader, limit int) ([]ev, error) {
	d := sse.NewDecoder(r, limit)
	var out []ev
	for {
		e, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev{Type: e.Type, Data: string(e.Data), ID: e.ID, Retry: e.Retry, Comment: e.Comment})
	}
}

// chunkReader returns its input in reads of at most n bytes.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// readers returns the ways each test input is fed to the decoder.
func readers(in string) map[string]io.Reader {
	return map[string]io.Reader{
		"whole":   strings.NewReader(in),
		"onebyte": iotest.OneByteReader(strings.NewReader(in)),
		"half":    iotest.HalfReader(strings.NewReader(in)),
		"dataerr": iotest.DataErrReader(strings.NewReader(in)),
		"chunks2": &chunkReader{b: []byte(in), n: 2},
		"chunks3": &chunkReader{b: []byte(in), n: 3},
		"chunks7": &chunkReader{b: []byte(in), n: 7},
	}
}

func TestDecoderSpec(t *testing.T) {
	msg := func(data string) ev { return ev{Data: data} }
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"empty stream", "", nil},
		{"single event", "data: hello\n\n", []ev{msg("hello")}},
		{"two events", "data: a\n\ndata: b\n\n", []ev{msg("a"), msg("b")}},
		{"multi-line data joined with LF", "data: a\ndata: b\ndata: c\n\n", []ev{msg("a\nb\nc")}},
		{"only one leading space stripped", "data:  two\n\n", []ev{msg(" two")}},
		{"no space after colon", "data:x\n\n", []ev{msg("x")}},
		{"tab is not stripped", "data:\tx\n\n", []ev{msg("\tx")}},
		{"trailing space kept", "data: x \n\n", []ev{msg("x ")}},
		{"colon in value kept", "data: a: b\n\n", []ev{msg("a: b")}},
		{"field without colon has empty value", "data\n\n", []ev{msg("")}},
		{"empty data line dispatches empty data", "data:\n\n", []ev{msg("")}},
		{"two empty data lines give one LF", "data\ndata\n\n", []ev{msg("\n")}},
		{"data then empty data line", "data: a\ndata:\n\n", []ev{msg("a\n")}},
		{"CRLF endings", "data: a\r\ndata: b\r\n\r\n", []ev{msg("a\nb")}},
		{"CR endings", "data: a\rdata: b\r\rdata: c\r\r", []ev{msg("a\nb"), msg("c")}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{msg("a\nb\nc")}},
		{"CR CR is two line endings", "data: a\r\rdata: b\n\n", []ev{msg("a"), msg("b")}},
		{"LF CR is two line endings", "data: a\n\rdata: b\n\n", []ev{msg("a"), msg("b")}},
		{"BOM stripped", "\xEF\xBB\xBFdata: a\n\n", []ev{msg("a")}},
		{"only first BOM stripped", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", []ev{msg("b")}},
		{"BOM later is data", "data: \xEF\xBB\xBFa\n\n", []ev{msg("\xEF\xBB\xBFa")}},
		{"event type", "event: add\ndata: 1\n\n", []ev{{Type: "add", Data: "1"}}},
		{"interned event type", "event: message_start\ndata: 1\n\nevent: message_start\ndata: 2\n\n",
			[]ev{{Type: "message_start", Data: "1"}, {Type: "message_start", Data: "2"}}},
		{"event type resets after dispatch", "event: add\ndata: 1\n\ndata: 2\n\n", []ev{{Type: "add", Data: "1"}, msg("2")}},
		{"event without data not dispatched and type reset", "event: add\n\ndata: 2\n\n", []ev{msg("2")}},
		{"last event field wins", "event: a\nevent: b\ndata: x\n\n", []ev{{Type: "b", Data: "x"}}},
		{"empty event field means message", "event:\ndata: x\n\n", []ev{msg("x")}},
		{"id set and persists", "id: 7\ndata: a\n\ndata: b\n\n", []ev{{ID: "7", Data: "a"}, {ID: "7", Data: "b"}}},
		{"id persists through undispatched event", "id: 7\n\ndata: b\n\n", []ev{{ID: "7", Data: "b"}}},
		{"empty id resets", "id: 7\ndata: a\n\nid\ndata: b\n\n", []ev{{ID: "7", Data: "a"}, {Data: "b"}}},
		{"id with NUL ignored", "id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n", []ev{{ID: "7", Data: "a"}, {ID: "7", Data: "b"}}},
		{"retry digits", "retry: 1500\ndata: a\n\ndata: b\n\n", []ev{{Retry: 1500 * time.Millisecond, Data: "a"}, msg("b")}},
		{"retry alone reported with next event", "retry: 20\n\ndata: a\n\n", []ev{{Retry: 20 * time.Millisecond, Data: "a"}}},
		{"retry zero", "retry: 0\ndata: a\n\n", []ev{msg("a")}},
		{"retry not digits ignored", "retry: 1.5\ndata: a\n\nretry: -1\ndata: b\n\nretry: 1s\ndata: c\n\n",
			[]ev{msg("a"), msg("b"), msg("c")}},
		{"retry empty ignored", "retry:\ndata: a\n\n", []ev{msg("a")}},
		{"retry overflow ignored", "retry: 99999999999999999999999\ndata: a\n\n", []ev{msg("a")}},
		{"retry leading space twice ignored", "retry:  5\ndata: a\n\n", []ev{msg("a")}},
		{"unknown fields ignored", "foo: bar\ndata: a\nDATA: b\nData: c\n\n", []ev{msg("a")}},
		{"field names are exact", "data : a\n data: b\ndata: c\n\n", []ev{msg("c")}},
		{"comment", ": keep-alive\n\n", []ev{{Comment: true, Data: "keep-alive"}}},
		{"comment without space", ":ping\n", []ev{{Comment: true, Data: "ping"}}},
		{"comment only one space stripped", ":  x\n", []ev{{Comment: true, Data: " x"}}},
		{"empty comment", ":\n", []ev{{Comment: true, Data: ""}}},
		{"comment inside event keeps it pending", "data: a\n: ka\ndata: b\n\n",
			[]ev{{Comment: true, Data: "ka"}, msg("a\nb")}},
		{"comment has no id", "id: 1\n: c\ndata: a\n\n", []ev{{Comment: true, Data: "c"}, {ID: "1", Data: "a"}}},
		{"blank lines between events", "\n\n\ndata: a\n\n\n\ndata: b\n\n", []ev{msg("a"), msg("b")}},
		{"deviation: pending event dispatched at EOF", "data: a\n", []ev{msg("a")}},
		{"deviation: unterminated line at EOF", "data: a\ndata: b", []ev{msg("a\nb")}},
		{"deviation: unterminated CR ended", "data: a\r", []ev{msg("a")}},
		{"no data at EOF not dispatched", "event: x\nid: 3\n", nil},
		{"openai shape", "data: {\"x\":1}\n\ndata: [DONE]\n\n", []ev{msg(`{"x":1}`), msg("[DONE]")}},
		{"partial BOM is data", "\xEF\xBB", nil},
		{"NUL in data kept", "data: a\x00b\n\n", []ev{msg("a\x00b")}},
	}
	for _, tt := range tests {
		for rname, r := range readers(tt.in) {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := collect(r, 0)
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if !equalEvents(got, tt.want) {
					t.Fatalf("events\n got %+v\nwant %+v", got, tt.want)
				}
			})
		}
	}
}

func equalEvents(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDecoderCRAtBufferBoundary puts a CR as the last byte of the decoder's first read and
// the LF as the first byte of the next read, at the decoder's own buffer size.
func TestDecoderCRAtBufferBoundary(t *testing.T) {
	for _, size := range []int{4096, 32 << 10, 32<<10 + 1, 64 << 10} {
		line := "data: " + strings.Repeat("x", size-len("data: ")-1) + "\r"
		in := line + "\ndata: y\r\n\r\n"
		for _, n := range []int{size, size - 1, size + 1} {
			got, err := collect(&chunkReader{b: []byte(in), n: n}, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := []ev{{Data: strings.Repeat("x", size-len("data: ")-1) + "\ny"}}
			if !equalEvents(got, want) {
				t.Fatalf("size %d chunk %d: got %d events", size, n, len(got))
			}
		}
	}
}

func TestDecoderLongLineWithinLimit(t *testing.T) {
	long := strings.Repeat("0123456789", 50_000) // 500 kB, larger than the read buffer
	in := "data: " + long + "\n\ndata: short\n\n"
	got, err := collect(iotest.HalfReader(strings.NewReader(in)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Data != long || got[1].Data != "short" {
		t.Fatalf("got %d events", len(got))
	}
}

func TestDecoderLimits(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []ev // events before the error
	}{
		{"line over limit", "data: ok\n\ndata: " + strings.Repeat("x", 100) + "\n\n", 50, []ev{{Data: "ok"}}},
		{"unterminated line over limit", "data: " + strings.Repeat("x", 100), 50, nil},
		{"comment over limit", ": " + strings.Repeat("x", 100) + "\n", 50, nil},
		{"ignored field over limit", "foo: " + strings.Repeat("x", 100) + "\n", 50, nil},
		{"data lines over limit together", strings.Repeat("data: "+strings.Repeat("x", 20)+"\n", 3) + "\n", 50, nil},
		{"line of exactly the limit", "data: " + strings.Repeat("x", 44) + "\n" + "data: " + strings.Repeat("y", 100) + "\n", 50, nil},
	}
	for _, tt := range tests {
		for rname, r := range readers(tt.in) {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := collect(r, tt.max)
				if !errors.Is(err, sse.ErrEventTooLarge) {
					t.Fatalf("error %v, want ErrEventTooLarge", err)
				}
				if !equalEvents(got, tt.want) {
					t.Fatalf("events %+v, want %+v", got, tt.want)
				}
			})
		}
	}

	t.Run("exactly the limit is accepted", func(t *testing.T) {
		// A 50-byte line, and 50 bytes of joined data (24 + 1 + 25).
		in := "data: " + strings.Repeat("x", 44) + "\n\ndata: " + strings.Repeat("a", 24) + "\ndata: " + strings.Repeat("b", 25) + "\n\n"
		got, err := collect(strings.NewReader(in), 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(got[1].Data) != 50 {
			t.Fatalf("got %+v", got)
		}
	})

	t.Run("sticky", func(t *testing.T) {
		d := sse.NewDecoder(strings.NewReader(strings.Repeat("x", 100)+"\n\ndata: a\n\n"), 10)
		_, err1 := d.Next()
		_, err2 := d.Next()
		if !errors.Is(err1, sse.ErrEventTooLarge) || err2 != err1 {
			t.Fatalf("errors %v, %v", err1, err2)
		}
	})
}

// endlessReader yields an endless "data: xxxx…" line without ever ending it, generated on
// the fly so the test itself holds no large buffer.
type endlessReader struct {
	prefix string
	n      int64 // bytes produced
	limit  int64 // 0: endless; else io.EOF after limit bytes
}

func (e *endlessReader) Read(p []byte) (int, error) {
	if e.limit > 0 && e.n >= e.limit {
		return 0, io.EOF
	}
	if e.limit > 0 && int64(len(p)) > e.limit-e.n {
		p = p[:e.limit-e.n]
	}
	for i := range p {
		if pos := e.n + int64(i); pos < int64(len(e.prefix)) {
			p[i] = e.prefix[pos]
		} else {
			p[i] = 'x'
		}
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestDecoderHugeLineBoundedMemory(t *testing.T) {
	const total = 100 << 20
	for _, tt := range []struct {
		name string
		r    *endlessReader
	}{
		{"100MB data line", &endlessReader{prefix: "data: ", limit: total}},
		{"100MB comment line", &endlessReader{prefix: ": ", limit: total}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtimeStats
			before.read()
			d := sse.NewDecoder(tt.r, 0)
			_, err := d.Next()
			after.read()
			if !errors.Is(err, sse.ErrEventTooLarge) {
				t.Fatalf("error %v, want ErrEventTooLarge", err)
			}
			alloc := after.totalAlloc - before.totalAlloc
			// The buffer grows by doubling to the 4 MiB limit: about 8 MiB in all.
			if limit := uint64(sse.DefaultMaxEventSize) * 5 / 2; alloc > limit {
				t.Fatalf("allocated %d bytes for a rejected line, want <= %d", alloc, limit)
			}
			if tt.r.n > 2*sse.DefaultMaxEventSize {
				t.Fatalf("read %d bytes before rejecting, want the decoder to stop near the limit", tt.r.n)
			}
			t.Logf("read %d bytes, allocated %d bytes", tt.r.n, alloc)
		})
	}
}

func TestDecoderManyDataLinesBoundedMemory(t *testing.T) {
	// An endless event made of short data lines, never dispatched.
	r := &repeatReader{line: []byte("data: " + strings.Repeat("y", 1000) + "\n")}
	var before, after runtimeStats
	before.read()
	d := sse.NewDecoder(r, 1<<20)
	_, err := d.Next()
	after.read()
	if !errors.Is(err, sse.ErrEventTooLarge) {
		t.Fatalf("error %v", err)
	}
	if alloc := after.totalAlloc - before.totalAlloc; alloc > 4<<20 {
		t.Fatalf("allocated %d bytes with a 1 MiB limit", alloc)
	}
}

type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.line[r.off:])
		n += k
		r.off = (r.off + k) % len(r.line)
	}
	return n, nil
}

func TestDecoderReaderErrors(t *testing.T) {
	boom := errors.New("boom")

	t.Run("error discards pending event", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
		got, err := collect(r, 0)
		if !errors.Is(err, boom) {
			t.Fatalf("error %v", err)
		}
		if !equalEvents(got, []ev{{Data: "a"}}) {
			t.Fatalf("events %+v", got)
		}
	})

	t.Run("data with error is used before the error", func(t *testing.T) {
		r := &dataThenErr{data: []byte("data: a\n\n"), err: boom}
		d := sse.NewDecoder(r, 0)
		e, err := d.Next()
		if err != nil || string(e.Data) != "a" {
			t.Fatalf("got %q, %v", e.Data, err)
		}
		if _, err := d.Next(); !errors.Is(err, boom) {
			t.Fatalf("error %v", err)
		}
		if _, err := d.Next(); !errors.Is(err, boom) {
			t.Fatalf("not sticky: %v", err)
		}
	})

	t.Run("unexpected EOF is not EOF", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("data: a\n"), iotest.ErrReader(io.ErrUnexpectedEOF))
		got, err := collect(r, 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 0 {
			t.Fatalf("events %+v, error %v", got, err)
		}
	})

	t.Run("no progress", func(t *testing.T) {
		_, err := collect(zeroReader{}, 0)
		if !errors.Is(err, io.ErrNoProgress) {
			t.Fatalf("error %v", err)
		}
	})

	t.Run("EOF repeats", func(t *testing.T) {
		d := sse.NewDecoder(strings.NewReader("data: a"), 0)
		if e, err := d.Next(); err != nil || string(e.Data) != "a" {
			t.Fatalf("got %q, %v", e.Data, err)
		}
		for range 3 {
			if _, err := d.Next(); err != io.EOF {
				t.Fatalf("error %v", err)
			}
		}
	})
}

type dataThenErr struct {
	data []byte
	err  error
}

func (r *dataThenErr) Read(p []byte) (int, error) {
	if r.data == nil {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = nil
	return n, r.err
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestDecoderDataReusesBuffer(t *testing.T) {
	// Data is documented as valid only until the next call: check the decoder really reuses
	// its buffer, so callers who keep it see the bug in their tests, not in production.
	d := sse.NewDecoder(strings.NewReader("data: aaaa\n\ndata: bbbb\n\n"), 0)
	e1, _ := d.Next()
	first := e1.Data
	e2, _ := d.Next()
	if string(e2.Data) != "bbbb" || string(first) != "bbbb" {
		t.Fatalf("first %q, second %q: want the buffer reused", first, e2.Data)
	}
}

func TestDecoderAllocs(t *testing.T) {
	in := []byte(strings.Repeat("event: content_block_delta\nid: 1\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n: ping\n\n", 1000))
	r := bytes.NewReader(in)
	d := sse.NewDecoder(r, 0)
	allocs := testing.AllocsPerRun(10, func() {
		r.Reset(in)
		d = sse.NewDecoder(r, 0)
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	})
	// Per run: the decoder, its read buffer, its data buffer's growth steps and the id string.
	if allocs > 10 {
		t.Fatalf("%v allocations for 2000 events, want a constant handful", allocs)
	}
}
