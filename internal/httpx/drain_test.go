package httpx_test

import (
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/internal/httpx"
)

// countingBody counts the bytes read from r and the calls to Close.
type countingBody struct {
	r      io.Reader
	n      int
	closes int
	close  func()
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

func (b *countingBody) Close() error {
	b.closes++
	if b.close != nil {
		b.close()
	}
	return nil
}

func TestCloseAfterEndReadsToTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBody{r: strings.NewReader(": trailing comment\n")}
		start := time.Now()
		if err := httpx.CloseAfterEnd(b); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("took %v for a body at hand", d)
		}
		if b.n != len(": trailing comment\n") || b.closes != 1 {
			t.Errorf("read %d bytes, closed %d times", b.n, b.closes)
		}
	})
}

// TestCloseAfterEndStalledBody: a body that stays open is closed after the wait, which
// unblocks the read; nothing is left running (synctest.Test fails on a goroutine left
// blocked in the bubble).
func TestCloseAfterEndStalledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		b := &countingBody{r: pr, close: func() { pr.Close() }}
		start := time.Now()
		if err := httpx.CloseAfterEnd(b); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("took %v, want the 10ms bound", d)
		}
		if b.closes != 1 {
			t.Errorf("closed %d times, want once", b.closes)
		}
		pw.Close()
	})
}

// TestCloseAfterEndEndlessBody: a body that keeps sending is read up to 4 KiB, not on.
func TestCloseAfterEndEndlessBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBody{r: endless{}}
		start := time.Now()
		if err := httpx.CloseAfterEnd(b); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("took %v", d)
		}
		if b.n != 4<<10 || b.closes != 1 {
			t.Errorf("read %d bytes, closed %d times; want 4096, once", b.n, b.closes)
		}
	})
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestEndReader(t *testing.T) {
	r := &httpx.EndReader{R: strings.NewReader("ab")}
	p := make([]byte, 2)
	if n, err := r.Read(p); n != 2 || err != nil || r.Done {
		t.Fatalf("first read: %d, %v, done %v", n, err, r.Done)
	}
	if n, err := r.Read(p); n != 0 || err != io.EOF || !r.Done {
		t.Fatalf("read at the end: %d, %v, done %v", n, err, r.Done)
	}
}

// TestAfterEndPassesTheRest: what follows the end marker reaches the caller, and the
// body's end is reported as it is.
func TestAfterEndPassesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBody{r: strings.NewReader(": trailing comment\n")}
		got, err := io.ReadAll(&httpx.AfterEnd{Body: b})
		if err != nil || string(got) != ": trailing comment\n" {
			t.Fatalf("read %q, %v", got, err)
		}
		if b.closes != 0 {
			t.Errorf("closed %d times: closing is the caller's", b.closes)
		}
	})
}

// TestAfterEndStalledBody: reads that wait 10 ms in all end the body, however the wait is
// split, and the timer that closed it is done when Read returns.
func TestAfterEndStalledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		b := &countingBody{r: pr, close: func() { pr.Close() }}
		r := &httpx.AfterEnd{Body: b}
		go func() {
			time.Sleep(6 * time.Millisecond)
			_, _ = pw.Write([]byte("x"))
		}()
		start := time.Now()
		p := make([]byte, 8)
		if n, err := r.Read(p); n != 1 || err != nil {
			t.Fatalf("first read: %d, %v", n, err)
		}
		if n, err := r.Read(p); n != 0 || err != io.EOF {
			t.Fatalf("second read: %d, %v; want the end", n, err)
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("took %v, want the 10ms bound over both reads", d)
		}
		if b.closes != 1 {
			t.Errorf("closed %d times, want once", b.closes)
		}
		if n, err := r.Read(p); n != 0 || err != io.EOF || b.closes != 1 {
			t.Errorf("read after the bound: %d, %v, %d closes", n, err, b.closes)
		}
		pw.Close()
	})
}

// TestAfterEndEndlessBody: a body that keeps sending is read up to 4 KiB, then closed.
func TestAfterEndEndlessBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBody{r: endless{}}
		got, err := io.ReadAll(&httpx.AfterEnd{Body: b})
		if err != nil || len(got) != 4<<10 || b.closes != 1 {
			t.Errorf("read %d bytes (%v), closed %d times; want 4096, once", len(got), err, b.closes)
		}
	})
}
