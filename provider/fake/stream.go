package fake

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
)

// item is one thing a stream yields after waiting: a chunk, or a terminal error (io.EOF
// for a clean end).
type item struct {
	wait  time.Duration
	chunk llmclient.Chunk
	err   error
}

// stream is the llmclient.ProviderStream of a played StreamStep. Recv is meant for one
// goroutine; Close may be called from any goroutine, any number of times. Every wait is a
// select on a timer, the call's context and the close channel, so nothing outlives it.
type stream struct {
	ctx       context.Context
	items     []item
	keepAlive time.Duration
	next      int           // index of the next item
	left      time.Duration // wait still due before items[next]
	timer     *time.Timer

	closed    chan struct{}
	closeOnce sync.Once
}

var _ llmclient.ProviderStream = (*stream)(nil)

// reportingStream is the stream of a step with RateLimits: it reports them as it opens.
type reportingStream struct {
	*stream
	rl *ratelimit.Status
}

var _ llmclient.RateLimitedStream = (*reportingStream)(nil)

// RateLimits returns the step's quota state.
func (s *reportingStream) RateLimits() *ratelimit.Status { return s.rl }

func newStream(ctx context.Context, items []item, keepAlive time.Duration) *stream {
	s := &stream{ctx: ctx, items: items, keepAlive: keepAlive, closed: make(chan struct{})}
	if len(items) > 0 {
		s.left = items[0].wait
	}
	return s
}

// Recv returns the next chunk, io.EOF after the final chunk, or the stream's error. After
// Close it returns ErrClosed; once the call's context is done, an error wrapping the
// context's error. It blocks while a wait is due, and Close or the context unblocks it.
func (s *stream) Recv() (llmclient.Chunk, error) {
	select {
	case <-s.closed:
		return llmclient.Chunk{}, ErrClosed
	default:
	}
	if s.ctx.Err() != nil {
		return llmclient.Chunk{}, ctxError(s.ctx)
	}
	if s.next >= len(s.items) {
		return llmclient.Chunk{}, io.EOF // not reached: every layout ends with an error item
	}
	for s.left > 0 {
		d, keepAlive := s.left, false
		if s.keepAlive > 0 && d > s.keepAlive {
			d, keepAlive = s.keepAlive, true
		}
		if err := s.sleep(d); err != nil {
			return llmclient.Chunk{}, err
		}
		s.left -= d
		if keepAlive {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
	}
	it := &s.items[s.next]
	if it.err != nil {
		return llmclient.Chunk{}, it.err // terminal: stay on it, so later calls repeat it
	}
	s.next++
	if s.next < len(s.items) {
		s.left = s.items[s.next].wait
	}
	return cloneChunk(it.chunk), nil
}

// sleep waits d on the stream's timer, or until the context is done or Close is called.
func (s *stream) sleep(d time.Duration) error {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return nil
	case <-s.ctx.Done():
		s.timer.Stop()
		return ctxError(s.ctx)
	case <-s.closed:
		s.timer.Stop()
		return ErrClosed
	}
}

// Close ends the stream and unblocks a waiting Recv. It always returns nil.
func (s *stream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// collect reads s to its end and assembles the Response, for Complete.
func collect(s *stream) (*llmclient.Response, error) {
	defer s.Close()
	var (
		resp                     llmclient.Response
		text, reasoning, refusal []byte
		toolIndex                []int // Index of each entry of resp.ToolCalls
	)
	for {
		c, err := s.Recv()
		if err == io.EOF { // the clean end, not a wrapped one
			break
		}
		if err != nil {
			return nil, err
		}
		text = append(text, c.Text...)
		reasoning = append(reasoning, c.Reasoning...)
		refusal = append(refusal, c.Refusal...)
		for _, d := range c.ToolCalls {
			i := slices.Index(toolIndex, d.Index)
			if i < 0 {
				i = len(resp.ToolCalls)
				toolIndex = append(toolIndex, d.Index)
				resp.ToolCalls = append(resp.ToolCalls, llmclient.ToolCall{})
			}
			tc := &resp.ToolCalls[i]
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Name != "" {
				tc.Name = d.Name
			}
			tc.Arguments += d.Arguments
		}
		if c.FinishReason != finish.None {
			resp.FinishReason, resp.RawFinishReason = c.FinishReason, c.RawFinishReason
		}
		if c.Usage != nil {
			resp.Usage = *c.Usage
		}
		if c.ID != "" {
			resp.ID = c.ID
		}
		if c.Model != "" {
			resp.Model = c.Model
		}
	}
	resp.Text, resp.Reasoning, resp.Refusal = string(text), string(reasoning), string(refusal)
	return &resp, nil
}
