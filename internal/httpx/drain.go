package httpx

import (
	"io"
	"sync"
	"time"
)

// The bounds of CloseAfterEnd: what it reads of a body after its end marker, and how long it
// waits for the body's end.
const (
	endDrainMax  = 4 << 10
	endDrainWait = 10 * time.Millisecond
)

// EndReader reads R and notes whether a read returned an error: io.EOF at the end of a
// response body (net/http has then taken its connection back), or a failure. A stream
// decodes its body through one, so that Close knows whether CloseAfterEnd has anything to
// wait for. It is not safe for concurrent use.
type EndReader struct {
	R    io.Reader
	Done bool // a read returned an error
}

func (r *EndReader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	if err != nil {
		r.Done = true
	}
	return n, err
}

// CloseAfterEnd closes rc, the body of a response whose content was all read (an event
// stream after its end marker), after reading on to the body's end so that the connection
// can be reused: net/http returns an HTTP/1.1 connection to its pool only once a read has
// reached the body's end (the chunked terminator, which a server writes after the last
// event, often in a packet of its own), and closing the body before that closes the
// connection. It reads at most 4 KiB for at most 10 ms: an upstream that holds the body
// open after its end marker, or keeps sending, delays the call by no more than that, and
// its connection is closed as before. At that bound rc is closed from a timer, which must
// unblock a Read in progress (as a net/http body's Close does); no goroutine outlives the
// call. It returns rc's Close error.
func CloseAfterEnd(rc io.ReadCloser) error {
	var closeErr error
	fired := make(chan struct{})
	t := time.AfterFunc(endDrainWait, func() {
		closeErr = rc.Close()
		close(fired)
	})
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, endDrainMax))
	if t.Stop() {
		return rc.Close()
	}
	<-fired
	return closeErr
}

// AfterEnd reads what follows the end of a response's content (an event stream after its
// end marker) for a caller that reads on to the body's end, within CloseAfterEnd's bounds
// over all its reads: at most 4 KiB, and at most 10 ms spent waiting. Past either bound it
// closes the body, from a timer when a read is blocked, and reports io.EOF: an upstream
// that holds the body open after its end marker, or keeps sending, does not hold the
// caller. Set Body before the first Read. It is not safe for concurrent use.
type AfterEnd struct {
	Body io.ReadCloser
	read int           // bytes read
	wait time.Duration // time spent in reads
	over bool          // a bound was reached: Body is closed
}

func (r *AfterEnd) Read(p []byte) (int, error) {
	if r.over || r.read >= endDrainMax || r.wait >= endDrainWait {
		if !r.over {
			r.over = true
			_ = r.Body.Close()
		}
		return 0, io.EOF
	}
	p = p[:min(len(p), endDrainMax-r.read)]
	start := time.Now()
	// The timer holds the body through a closer it lets go of after the read: a stopped
	// timer may stay in the runtime's heap for a while, and must not keep the body alive.
	c := &closer{rc: r.Body}
	t := time.AfterFunc(endDrainWait-r.wait, c.close)
	n, err := r.Body.Read(p)
	r.read += n
	r.wait += time.Since(start)
	t.Stop()
	if c.release() {
		r.over = true // closed by the timer: what this read returned is all there is
		return n, io.EOF
	}
	return n, err
}

// closer closes rc once, from a timer, unless released first.
type closer struct {
	mu     sync.Mutex
	rc     io.Closer
	closed bool
}

func (c *closer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rc != nil {
		_ = c.rc.Close()
		c.rc, c.closed = nil, true
	}
}

// release lets go of rc and reports whether close closed it. Once it returns, close has
// returned or will do nothing.
func (c *closer) release() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rc = nil
	return c.closed
}
