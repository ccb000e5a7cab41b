package llmgateway

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type countingWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.b.Write(p)
}

func (w *countingWriter) state() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.b.String()
}

// The default logger's buffer turns many lines into few writes, keeps them whole and in
// order, writes them out logFlushEvery after the first, at logBufferMax bytes, and at
// close; after close it writes through.
func TestLogBufferBatchesLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &countingWriter{}
		b := newLogBuffer(w)
		var want strings.Builder
		for i := range 100 {
			line := fmt.Sprintf("{\"msg\":\"request\",\"n\":%d}\n", i)
			want.WriteString(line)
			if n, err := b.Write([]byte(line)); n != len(line) || err != nil {
				t.Fatal(n, err)
			}
		}
		if n, _ := w.state(); n != 0 {
			t.Fatalf("%d writes before the flush interval", n)
		}
		time.Sleep(logFlushEvery)
		synctest.Wait()
		if n, got := w.state(); n != 1 || got != want.String() {
			t.Fatalf("after the interval: %d writes, %d of %d bytes", n, len(got), want.Len())
		}
		// A full buffer is written at once, without waiting for the timer.
		big := strings.Repeat("x", 1023) + "\n"
		for range logBufferMax / len(big) {
			_, _ = b.Write([]byte(big))
		}
		if n, got := w.state(); n != 2 || len(got) != want.Len()+logBufferMax {
			t.Fatalf("full buffer: %d writes, %d bytes", n, len(got))
		}
		_, _ = b.Write([]byte("last\n"))
		if err := b.close(); err != nil {
			t.Fatal(err)
		}
		if n, got := w.state(); n != 3 || !strings.HasSuffix(got, big+"last\n") {
			t.Fatalf("close: %d writes", n)
		}
		_, _ = b.Write([]byte("after\n"))
		if n, got := w.state(); n != 4 || !strings.HasSuffix(got, "last\nafter\n") {
			t.Fatalf("after close: %d writes", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n, _ := w.state(); n != 4 {
			t.Fatalf("a timer wrote after close: %d writes", n)
		}
	})
}

// blockingWriter holds every write until release is closed.
type blockingWriter struct {
	countingWriter
	started chan struct{}
	release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.started <- struct{}{}:
	default:
	}
	<-w.release
	return w.countingWriter.Write(p)
}

// A line does not wait for an earlier batch's write: while a flush is stuck in a slow
// destination, requests still log (only a full buffer waits).
func TestLogLineDoesNotWaitForAnEarlierBatch(t *testing.T) {
	w := &blockingWriter{started: make(chan struct{}, 1), release: make(chan struct{})}
	b := newLogBuffer(w)
	b.every = time.Hour // flushed below, not by the timer
	_, _ = b.Write([]byte("first\n"))
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		b.flush()
	}()
	<-w.started // the flush is in the destination's Write, and stays there
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Write([]byte("second\n"))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a line waited for the earlier batch's write")
	}
	close(w.release)
	<-flushed
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if n, got := w.state(); n != 2 || got != "first\nsecond\n" {
		t.Fatalf("%d writes: %q", n, got)
	}
}
