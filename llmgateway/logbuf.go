package llmgateway

import (
	"io"
	"sync"
	"time"
)

// logBuffer batches the default logger's lines (one per request at level info) into
// few writes: a line is appended to a buffer that is written out when it reaches
// logBufferMax, or logFlushEvery after the first line put into an empty buffer. The
// access log then costs a request an append instead of a write system call. Lines
// stay whole and in order. Safe for concurrent use.
type logBuffer struct {
	w     io.Writer
	every time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer
	closed bool
}

const (
	logBufferMax  = 64 << 10
	logFlushEvery = 100 * time.Millisecond
)

func newLogBuffer(w io.Writer) *logBuffer {
	return &logBuffer{w: w, every: logFlushEvery}
}

// Write takes one log line. After close it writes through.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	if len(b.buf) == 0 {
		if b.timer == nil {
			b.timer = time.AfterFunc(b.every, b.flush)
		} else {
			b.timer.Reset(b.every)
		}
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferMax {
		b.writeLocked()
	}
	return len(p), nil
}

func (b *logBuffer) flush() {
	b.mu.Lock()
	b.writeLocked()
	b.mu.Unlock()
}

func (b *logBuffer) writeLocked() {
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.w.Write(b.buf)
	if cap(b.buf) > 4*logBufferMax {
		b.buf = nil
	} else {
		b.buf = b.buf[:0]
	}
}

// close writes what is buffered; later lines are written at once.
func (b *logBuffer) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.closed = true
	b.writeLocked()
	return nil
}
