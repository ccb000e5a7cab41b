package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// Drain reads st to its end and describes each chunk (see Describe); the error is nil
// after io.EOF, else the one Recv returned.
func Drain(st llmclient.ProviderStream) ([]string, error) {
	var out []string
	for {
		c, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, Describe(c))
	}
}

// Describe renders a chunk on one line: "keep-alive", or its id and model, text,
// reasoning, tool-call deltas, finish reason and usage, the empty ones left out.
func Describe(c llmclient.Chunk) string {
	if c.KeepAlive {
		return "keep-alive"
	}
	var parts []string
	if c.ID != "" || c.Model != "" {
		parts = append(parts, fmt.Sprintf("id=%s model=%s", c.ID, c.Model))
	}
	if c.Text != "" {
		parts = append(parts, fmt.Sprintf("text=%q", c.Text))
	}
	if c.Reasoning != "" {
		parts = append(parts, fmt.Sprintf("reasoning=%q", c.Reasoning))
	}
	for _, d := range c.ToolCalls {
		parts = append(parts, fmt.Sprintf("tool[%d]=%s,%s,%s", d.Index, d.ID, d.Name, d.Arguments))
	}
	if c.FinishReason != "" {
		parts = append(parts, fmt.Sprintf("finish=%s(%s)", c.FinishReason, c.RawFinishReason))
	}
	if u := c.Usage; u != nil {
		parts = append(parts, fmt.Sprintf("usage=in:%d,out:%d,total:%d,cached:%d,reasoning:%d",
			u.InputTokens, u.OutputTokens, u.TotalTokens, u.CachedInputTokens, u.ReasoningTokens))
		if u.CacheWriteTokens != 0 {
			parts[len(parts)-1] += fmt.Sprintf(",cache_write:%d", u.CacheWriteTokens)
		}
	}
	return strings.Join(parts, " ")
}

// RecvAll reads st until Recv fails and returns the chunks and that error (io.EOF on a
// clean end). It fails t when Recv returns more than max chunks: a stream must make
// progress.
func RecvAll(t testing.TB, st llmclient.ProviderStream, max int) ([]llmclient.Chunk, error) {
	t.Helper()
	var out []llmclient.Chunk
	for {
		c, err := st.Recv()
		if err != nil {
			return out, err
		}
		out = append(out, c)
		if len(out) > max {
			t.Fatalf("stream does not end: more than %d chunks", max)
		}
	}
}

// FuzzRecv reads st to its end as a stream fuzz target does: through RecvAll with max,
// then failing t on an *llmclient.Error without a class or on a failing Close. It returns
// whether a chunk carried a finish reason, and Recv's final error.
func FuzzRecv(t testing.TB, st llmclient.ProviderStream, max int) (finished bool, err error) {
	t.Helper()
	chunks, err := RecvAll(t, st, max)
	for _, c := range chunks {
		if c.FinishReason != "" {
			finished = true
		}
	}
	var e *llmclient.Error
	if errors.As(err, &e) && e.Class == failure.None {
		t.Fatalf("error without class: %v", err)
	}
	if cerr := st.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	return finished, err
}

// DrainError drains st, which must fail with an *llmclient.Error and keep returning that
// same error, and returns the chunks before it (described) and the error.
func DrainError(t testing.TB, st llmclient.ProviderStream) ([]string, *llmclient.Error) {
	t.Helper()
	got, err := Drain(st)
	var e *llmclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *llmclient.Error", err)
	}
	if _, again := st.Recv(); again != err {
		t.Errorf("Recv after the error = %v, want the same error", again)
	}
	return got, e
}

// StreamCuts are the broken streams CheckStreamCuts tries, in the vendor's format.
type StreamCuts struct {
	Unfinished string // valid events without the end marker or final finish reason
	Chunks     int    // how many chunks Unfinished yields
	Dropped    string // a head after which the server drops the connection
	Garbage    string // an event whose data is not valid JSON
}

// CheckStreamCuts checks how a stream ends when it is cut: a body that ends before the
// stream's end, a dropped connection and an empty body fail with an error wrapping
// io.ErrUnexpectedEOF, of class network; an event that is not JSON fails as a
// server_error. open returns a stream from a server answering with reply.
func CheckStreamCuts(t *testing.T, open func(*testing.T, http.HandlerFunc) llmclient.ProviderStream, c StreamCuts) {
	t.Helper()
	cut := func(t *testing.T, reply http.HandlerFunc, chunks int) {
		t.Helper()
		got, err := Drain(open(t, reply))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
		}
		if chunks >= 0 && len(got) != chunks {
			t.Errorf("chunks = %q, want %d", got, chunks)
		}
		if c := llmclient.ClassOf(err); c != failure.Network {
			t.Errorf("class = %v, want network", c)
		}
	}
	t.Run("unfinished", func(t *testing.T) { cut(t, SSE(c.Unfinished), c.Chunks) })
	t.Run("connection dropped", func(t *testing.T) { cut(t, Drop(c.Dropped), -1) })
	t.Run("empty body", func(t *testing.T) { cut(t, SSE(""), 0) })
	t.Run("garbage event", func(t *testing.T) {
		_, err := Drain(open(t, SSE(c.Garbage)))
		if cl := llmclient.ClassOf(err); cl != failure.ServerError {
			t.Fatalf("err = %v (class %v), want a server_error", err, cl)
		}
	})
}

// CheckCloseUnblocks checks that Close ends a Recv waiting on a silent upstream with an
// error wrapping net.ErrClosed, and that a second Close succeeds. st must be stalled (see
// Stall) after what it has returned so far.
func CheckCloseUnblocks(t testing.TB, st llmclient.ProviderStream) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let Recv block on the network (not a timing assertion)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Recv after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Recv")
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// CheckCancelOnClose checks that closing a stream cancels its request's context: open
// builds the stream over an empty body with the given cancel.
func CheckCancelOnClose(t testing.TB, open func(resp *http.Response, cancel context.CancelFunc) llmclient.ProviderStream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := open(&http.Response{Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, cancel)
	st.Close()
	if ctx.Err() == nil {
		t.Error("Close did not cancel the request context")
	}
}

// BenchStream measures reading body to its end through open, which builds a stream over a
// 200 response with header h; allocations are per stream. open must not keep the response
// itself, only its fields: it is reused.
func BenchStream(b *testing.B, body []byte, h http.Header, open func(*http.Response) llmclient.ProviderStream) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	// One Response for all streams, so that only what the stream itself costs is counted
	// (open is a func value: a Response passed to it would escape).
	resp := &http.Response{StatusCode: 200, Header: h}
	for b.Loop() {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		s := open(resp)
		for {
			if _, err := s.Recv(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
