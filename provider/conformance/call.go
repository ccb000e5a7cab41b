package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/llmclient/llmclient"
)

// callProvider makes one call through the adapter.
func callProvider(ctx context.Context, p llmclient.Provider, call *llmclient.Call, stream bool) *result {
	if !stream {
		resp, err := p.Complete(ctx, call)
		return &result{resp: resp, err: err}
	}
	ps, err := p.Stream(ctx, call)
	if err != nil {
		return &result{err: err}
	}
	if ps == nil {
		return &result{err: errors.New("Stream returned neither a stream nor an error")}
	}
	r := &result{opened: true}
	var chunks []llmclient.Chunk
	for i := 0; ; i++ {
		if i == maxChunks {
			r.err = fmt.Errorf("stream did not end after %d chunks", maxChunks)
			break
		}
		c, err := ps.Recv()
		if err == io.EOF {
			r.cleanEOF = true
			break
		}
		if err != nil {
			r.err = err
			break
		}
		if c.KeepAlive {
			continue
		}
		if c.Text != "" {
			r.chunks = append(r.chunks, c.Text)
		}
		if c.HasContent() {
			r.content = true
		}
		chunks = append(chunks, c)
	}
	// Close must be safe to call more than once.
	_ = ps.Close()
	_ = ps.Close()
	r.resp = accumulate(chunks)
	return r
}

// callClient makes one call through the Client.
func callClient(ctx context.Context, c *llmclient.Client, req *llmclient.Request, stream bool) *result {
	if !stream {
		resp, err := c.Complete(ctx, req)
		return &result{resp: resp, err: err}
	}
	s, err := c.Stream(ctx, req)
	if err != nil {
		return &result{err: err}
	}
	r := &result{opened: true}
	for i := 0; s.Next(); i++ {
		if i == maxChunks {
			r.err = fmt.Errorf("stream did not end after %d chunks", maxChunks)
			break
		}
		ch := s.Current()
		if ch.Text != "" {
			r.chunks = append(r.chunks, ch.Text)
		}
		if ch.HasContent() {
			r.content = true
		}
	}
	if r.err == nil {
		r.err = s.Err()
	}
	r.resp = s.Response()
	_ = s.Close()
	_ = s.Close()
	return r
}

// followUp returns req continued with the assistant's tool calls and one result per call.
func followUp(req *llmclient.Request, resp *llmclient.Response, content string) *llmclient.Request {
	next := cloneRequest(req)
	next.Messages = append(next.Messages, llmclient.Message{
		Role:      llmclient.RoleAssistant,
		ToolCalls: slices.Clone(resp.ToolCalls),
	})
	for _, tc := range resp.ToolCalls {
		next.Messages = append(next.Messages, llmclient.ToolResultMessage(tc.ID, content))
	}
	return next
}

// cloneRequest copies req deeply enough that a case's calls cannot change the table.
func cloneRequest(req *llmclient.Request) *llmclient.Request {
	cp := *req
	cp.Messages = slices.Clone(req.Messages)
	cp.Tools = slices.Clone(req.Tools)
	return &cp
}
