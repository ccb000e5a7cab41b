package llmclient

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// readUpTo reads what io.ReadAll reads, up to the limit, at every size around the held
// buffers' boundaries, with the declared size exact, too large, too small or unknown; its
// held body, when there is one, shares the data's allocation and reads it back.
func TestReadUpToIsReadAll(t *testing.T) {
	const max = 5000
	for _, n := range []int{0, 1, 2, 127, 128, 129, 255, 256, 511, 512, 1000, 1023, 1024, 2047, 2048, 4095, 4096, 4097, 4999, 5000, 5001, 6000} {
		src := strings.Repeat("0123456789abcdef", n/16+1)[:n]
		for _, declared := range []int64{int64(n), int64(n) + 1, int64(n) - 1, 0, -1} {
			data, held, err := readUpTo(io.NopCloser(strings.NewReader(src)), declared, max)
			want := src
			if len(want) > max {
				want = want[:max+1]
			}
			switch {
			case declared > int64(n) && declared <= max:
				if err == nil {
					t.Errorf("size %d declared %d: no error for a short body", n, declared)
				}
				continue
			case err != nil:
				t.Errorf("size %d declared %d: %v", n, declared, err)
				continue
			case string(data) != want:
				t.Errorf("size %d declared %d: read %d bytes, want %d", n, declared, len(data), len(want))
			}
			if wantHeld := declared > 0 && declared <= max && declared < 4096; (held != nil) != wantHeld {
				t.Errorf("size %d declared %d: held %v, want %v", n, declared, held != nil, wantHeld)
			}
			if held == nil {
				continue
			}
			held.Reset(data)
			got, _ := io.ReadAll(held)
			if !bytes.Equal(got, data) {
				t.Errorf("size %d declared %d: the held body reads %d bytes", n, declared, len(got))
			}
		}
	}
}

// readFull returns the error io.ReadFull returns, whatever the reader returns with its
// last bytes or after them, and fills the buffer as far as it does.
func TestReadFullIsIoReadFull(t *testing.T) {
	errOther := errors.New("other")
	readers := map[string]func(src string) io.Reader{
		"whole":         func(src string) io.Reader { return strings.NewReader(src) },
		"a byte a time": func(src string) io.Reader { return iotest.OneByteReader(strings.NewReader(src)) },
		"half":          func(src string) io.Reader { return iotest.HalfReader(strings.NewReader(src)) },
		"EOF with data": func(src string) io.Reader { return iotest.DataErrReader(strings.NewReader(src)) },
		"error after": func(src string) io.Reader {
			return io.MultiReader(strings.NewReader(src), iotest.ErrReader(errOther))
		},
		"error at once": func(string) io.Reader { return iotest.ErrReader(errOther) },
	}
	for name, newReader := range readers {
		for _, n := range []int{0, 1, 7, 8, 100} {
			for _, size := range []int{0, 1, n - 1, n, n + 1} {
				if size < 0 {
					continue
				}
				src := strings.Repeat("x", n)
				got, want := make([]byte, size), make([]byte, size)
				_, wantErr := io.ReadFull(newReader(src), want)
				gotErr := readFull(io.NopCloser(newReader(src)), got)
				if gotErr != wantErr || !bytes.Equal(got, want) {
					t.Errorf("%s, %d bytes into %d: %v %q, want %v %q", name, n, size, gotErr, got, wantErr, want)
				}
			}
		}
	}
}

// isEventStreamTrimLeft is isEventStream as it was with strings.TrimLeft: the oracle.
func isEventStreamTrimLeft(ct string) bool {
	ct = strings.TrimLeft(ct, " \t")
	const es = "text/event-stream"
	if len(ct) < len(es) || !strings.EqualFold(ct[:len(es)], es) {
		return false
	}
	if len(ct) == len(es) || ct[len(es)] == ';' || ct[len(es)] == ' ' {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == es
}

func FuzzIsEventStream(f *testing.F) {
	for _, ct := range []string{"", " ", "\t \ttext/event-stream", "text/event-stream", "TEXT/Event-Stream; charset=utf-8",
		"text/event-streamx", "text/event-stream\t", "application/json", " \x00text/event-stream", "text/event-stream;;"} {
		f.Add(ct)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if got, want := isEventStream(ct), isEventStreamTrimLeft(ct); got != want {
			t.Fatalf("isEventStream(%q) = %v, want %v", ct, got, want)
		}
	})
}

// A pooled call's message arrays keep nothing of its request once it is released, however
// much of them the Dialect wrote: the request's messages in them, a read that gave up
// half-way (the messages then come from elsewhere, or are none), more messages than they
// hold.
func TestReleaseClearsTheMessageArrays(t *testing.T) {
	fill := func(tr *txRun, n int) {
		for i := range n {
			tr.parts[i] = TextPart("body text")
			tr.msgs[i] = Message{Role: RoleUser, Content: tr.parts[i : i+1], Name: "n"}
		}
	}
	cases := map[string]func(tr *txRun){
		"in the arrays": func(tr *txRun) {
			fill(tr, 2)
			tr.x.call.Request.Messages = tr.msgs[:2]
		},
		"given up half-way": func(tr *txRun) {
			fill(tr, 3)
			tr.x.call.Request.Messages = []Message{UserMessage("decoded")}
		},
		"given up, none": func(tr *txRun) {
			fill(tr, 4)
		},
		"more than they hold": func(tr *txRun) {
			fill(tr, 4)
			tr.x.call.Request.Messages = append(tr.msgs[:4:4], UserMessage("fifth"))
		},
	}
	for name, write := range cases {
		tr := new(txRun)
		write(tr)
		tr.release()
		if !reflect.DeepEqual(tr.msgs, [len(tr.msgs)]Message{}) || !reflect.DeepEqual(tr.parts, [len(tr.parts)]Part{}) {
			t.Errorf("%s: the released call's arrays still hold %+v %+v", name, tr.msgs, tr.parts)
		}
	}
}
