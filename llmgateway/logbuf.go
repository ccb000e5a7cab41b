package llmgateway

import (
	"io"
	"sync"
	"time"
)

// logBuffer batches the default logger's lines (one per request at level info) into
// few writes: a line is appended to a buffer that is written out when it reaches
// logBufferMax, or logFlushEvery after the first line put into an empty buffer. The
// access log then costs a request an append instead of a write system call, and a line
// never waits for an earlier batch's write to finish unless the buffer is full (then
// the line's writer waits, so a log destination that cannot keep up slows the lines
// down instead of growing the buffer). Lines stay whole and in order. Safe for
// concurrent use.
type logBuffer struct {
	w     io.Writer
	every time.Duration

	// wmu is held while a batch is written to w, so batches go out whole and in the
	// order they were taken; out is the batch being written, kept for reuse.
	wmu sync.Mutex
	out []byte

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
	if b.closed {
		b.mu.Unlock()
		b.wmu.Lock()
		defer b.wmu.Unlock()
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
	full := len(b.buf) >= logBufferMax
	b.mu.Unlock()
	if full {
		b.flush()
	}
	return len(p), nil
}

// flush writes out what is buffered, the buffer's lock released during the write.
func (b *logBuffer) flush() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	b.buf, b.out = b.out[:0], b.buf
	b.mu.Unlock()
	b.writeOut()
}

// writeOut writes out to w; wmu is held.
func (b *logBuffer) writeOut() {
	if len(b.out) > 0 {
		_, _ = b.w.Write(b.out)
	}
	if cap(b.out) > 4*logBufferMax {
		b.out = nil
	} else {
		b.out = b.out[:0]
	}
}

// close writes what is buffered; later lines are written at once.
func (b *logBuffer) close() error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.closed = true
	b.buf, b.out = nil, b.buf
	b.mu.Unlock()
	b.writeOut()
	return nil
}
