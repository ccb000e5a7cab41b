package cache

import (
	"errors"
	"sync"

	"github.com/llmclient/llmclient"
)

// recorder keeps the chunks of a stream as the caller reads them, up to limit bytes
// (chunkSize), and hands them to done when the stream ends, with why set when they must
// not be stored. Its mutex orders the reader's chunks with an end that comes from Close
// on another goroutine.
type recorder struct {
	mu     sync.Mutex
	ended  bool
	chunks []llmclient.Chunk
	size   int
	limit  int
	over   bool
	done   func(resp *llmclient.Response, chunks []llmclient.Chunk, why error)
}

func newRecorder(limit int, done func(*llmclient.Response, []llmclient.Chunk, error)) *recorder {
	return &recorder{chunks: []llmclient.Chunk{}, limit: limit, done: done}
}

func (r *recorder) chunk(ch llmclient.Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over || r.ended {
		return
	}
	r.size += chunkSize(&ch)
	if r.size > r.limit {
		r.over, r.chunks = true, nil
		return
	}
	r.chunks = append(r.chunks, cloneChunk(ch))
}

func (r *recorder) end(resp *llmclient.Response, err error) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended = true
	chunks, over := r.chunks, r.over
	r.chunks = nil
	r.mu.Unlock()
	var why error
	switch {
	case err != nil || resp == nil:
		why = errors.Join(ErrIncomplete, err)
	case over:
		why = ErrTooLarge
	}
	r.done(resp, chunks, why)
}
