package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reads with no context deadline and the default options end, whatever the upstream does
// after the response's headers: every wait on it is bounded by the idle timeout, and so is
// every lease the call holds. A body read raw, whose phase is unknown, gets the reasoning
// phase's limit (2m by default, until learned); a decoded stream in its content phase,
// 1m. Inside a synctest
// bubble, a read that waits for ever is a deadlock, and fails the test.

// emptyChunk is a data event without content: an id and an empty delta.
const emptyChunk = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{}}]}` + "\n\n"

// emptyToolChunk is a data event whose tool-call delta carries nothing: no id, name or
// arguments.
const emptyToolChunk = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}` + "\n\n"

// dripEmpty streams one content chunk, then content-less chunks every second for ever.
func dripEmpty(w http.ResponseWriter, r *http.Request) { dripEvery(emptyChunk)(w, r) }

// dripEvery streams one content chunk, then the event every second for ever.
func dripEvery(event string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk+chunk("a"))
		for {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
			if _, err := io.WriteString(w, event); err != nil {
				return
			}
		}
	}
}

// oneAtATime is an OpenAI-dialect upstream at http://a.test/v1 with one key that serves
// one request at a time, through h when h is set (for a typed Client).
func oneAtATime(t *testing.T, h http.Handler) llmclient.Option {
	t.Helper()
	opts := []openai.Option{openai.WithBaseURL("http://a.test/v1")}
	if h != nil {
		opts = append(opts, openai.WithHTTPClient(&http.Client{Transport: memTransport{h}}))
	}
	p, err := openai.New(opts...)
	require.NoError(t, err)
	return llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k1"},
		Limits: llmclient.Limits{MaxConcurrent: 1}})
}

// readAllTimed reads resp's body to its end and reports what it read, the error and how
// long it took.
func readAllTimed(t *testing.T, resp *http.Response) (string, error, time.Duration) {
	t.Helper()
	var body string
	var err error
	d := elapsed(func() { body, err = readBody(t, resp) })
	return body, err, d
}

func TestTransportBodyReadRawIsBoundedByTheIdleTimeout(t *testing.T) {
	stallAfter := func(contentType, data string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = io.WriteString(w, data)
			<-r.Context().Done()
		}
	}
	for name, tc := range map[string]struct {
		path, body string
		answer     func(http.ResponseWriter, *http.Request)
		opts       []llmclient.TransportOption
	}{
		"an event stream on a path the dialect does not know": {
			path: "/v1/realtime/events", body: `{"model":"gpt-4o"}`,
			answer: stallAfter("text/event-stream", "data: {\"x\":1}\n\n"),
		},
		"a one-shot request answered as an event stream": {
			path: "/v1/chat/completions", body: chatBody,
			answer: stallAfter("text/event-stream", roleChunk+chunk("a")),
		},
		"a one-shot body larger than the replay limit": {
			path: "/v1/chat/completions", body: chatBody,
			answer: stallAfter("application/json", `{"id":"c1","choices":[{"message":{"content":"`+strings.Repeat("x", 4<<10)),
			opts:   []llmclient.TransportOption{llmclient.WithMaxReplayBody(1 << 10)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tc.answer)
				c := newClient(t, oneAtATime(t, nil))
				rt := c.Transport(memTransport{hostMux{"a.test": up}}, tc.opts...)
				resp, err := post(t, context.Background(), rt, "http://a.test"+tc.path, tc.body)
				require.NoError(t, err)
				_, err, d := readAllTimed(t, resp)
				require.ErrorIs(t, err, llmclient.ErrIdleTimeout)
				assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
				assert.Equal(t, 2*time.Minute, d, "the reasoning phase's default idle timeout")

				// The call's slot came back: the next call is admitted at once.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				resp, err = post(t, ctx, rt, "http://a.test"+tc.path, tc.body)
				require.NoError(t, err)
				_ = resp.Body.Close()
				assert.Equal(t, 2, up.count())
			})
		})
	}
}

// Once a stream's end marker was read, what follows is read for at most the drain bound
// of a closing body: an upstream holding the connection open after [DONE] does not hold
// a caller that reads on to the body's end (as openai-go's stream reader does).
func TestTransportReadPastTheEndMarkerIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, roleChunk+chunk("ok")+stopChunk+done)
			<-r.Context().Done()
		})
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1", "k1"))
		rt := c.Transport(memTransport{hostMux{"a.test": up}})
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err, d := readAllTimed(t, resp)
		require.NoError(t, err, "the stream ended at its marker: a clean end")
		assert.True(t, strings.HasSuffix(body, done), "every byte up to the end marker is delivered")
		assert.LessOrEqual(t, d, 10*time.Millisecond)
	})
}

// Data events without content (an id, a model, an empty delta) are not progress: like
// keep-alives they do not restart the idle timeout, in a typed stream and through the
// transport. (The calls' 10-minute deadline only ends the test should they go on.)
func TestContentlessChunksDoNotHoldAStreamOpen(t *testing.T) {
	t.Run("typed stream", func(t *testing.T) {
		for _, event := range []string{emptyChunk, emptyToolChunk} {
			synctest.Test(t, func(t *testing.T) {
				c := newClient(t, openaiOver(t, "a", newScript(dripEvery(event)), "k1"), llmclient.WithMaxAttempts(1))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				s, err := c.Stream(ctx, chatReq("gpt-4o"))
				require.NoError(t, err)
				defer s.Close()
				var text string
				d := elapsed(func() {
					for s.Next() {
						text += s.Current().Text
					}
				})
				assert.Equal(t, "a", text)
				require.ErrorIs(t, s.Err(), llmclient.ErrIdleTimeout)
				assert.Equal(t, time.Minute, d)
			})
		}
	})
	t.Run("typed stream, caller away", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := newScript(dripEmpty, ok(chatOK))
			c := newClient(t, oneAtATime(t, up), llmclient.WithMaxAttempts(1))
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer scancel()
			s, err := c.Stream(sctx, chatReq("gpt-4o"))
			require.NoError(t, err)
			defer s.Close()
			require.True(t, s.Next())
			// The caller stops reading: the read-ahead times the upstream, and the stream
			// ends, giving its slot back, within two idle periods: 1m away, then 1m of
			// content-less chunks read ahead.
			time.Sleep(2*time.Minute + time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = c.Complete(ctx, chatReq("gpt-4o"))
			require.NoError(t, err, "the stream's slot came back")
			for s.Next() {
				assert.Empty(t, s.Current().Text, "only content-less chunks were read ahead")
			}
			assert.ErrorIs(t, s.Err(), llmclient.ErrIdleTimeout)
		})
	})
	t.Run("transport", func(t *testing.T) {
		for _, event := range []string{emptyChunk, emptyToolChunk} {
			synctest.Test(t, func(t *testing.T) {
				c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1", "k1"), llmclient.WithMaxAttempts(1))
				rt := c.Transport(memTransport{hostMux{"a.test": newScript(dripEvery(event))}})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				resp, err := post(t, ctx, rt, "http://a.test/v1/chat/completions", streamBody)
				require.NoError(t, err)
				_, err, d := readAllTimed(t, resp)
				require.ErrorIs(t, err, llmclient.ErrIdleTimeout)
				assert.Equal(t, time.Minute, d)
			})
		}
	})
}

// A transport caller that holds a stream's body and stops reading it gets the same bound
// as a typed stream's caller: after an idle period away the body is read ahead (up to
// 1 MiB), so an upstream that stalls is cut at the idle timeout, and a caller that has
// not read for the idle limit while the body is read ahead ends the stream, however much
// the upstream sends; either way the call's leases come back while the caller still
// holds the body.
func TestTransportBodyNotReadGivesItsLeasesBack(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	for name, tc := range map[string]struct {
		answer func(http.ResponseWriter, *http.Request)
		back   time.Duration // when the second call is admitted
	}{
		"the upstream stalls": {
			answer: sseStep(ev{0, roleChunk + chunk("a")}, ev{-1, ""}),
			back:   2 * time.Minute, // an idle period away, then one timed on the upstream
		},
		"the upstream keeps sending": {
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for {
					if _, err := io.WriteString(w, chunk(big)); err != nil {
						return
					}
					select {
					case <-time.After(100 * time.Millisecond):
					case <-r.Context().Done():
						return
					}
				}
			},
			// An idle period away before the read-ahead starts (the watchdog's period),
			// then the limit, counted from the hand-over, found past at its next look.
			back: 2 * time.Minute,
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tc.answer, ok(chatOK))
				c := newClient(t, oneAtATime(t, nil), llmclient.WithMaxAttempts(1))
				rt := c.Transport(memTransport{hostMux{"a.test": up}})
				held, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
				require.NoError(t, err)
				defer held.Body.Close()
				start := time.Now()
				var resp *http.Response
				d := elapsed(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
					defer cancel()
					resp, err = post(t, ctx, rt, "http://a.test/v1/chat/completions", chatBody)
				})
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode, "the held body's slot came back (after %v)", time.Since(start))
				assert.InDelta(t, tc.back.Seconds(), d.Seconds(), 1)
				assert.Equal(t, 2, up.count())
			})
		})
	}
}

// flood answers with head, then writes unit over and over until the client goes away,
// counting the bytes the client took.
func flood(head, unit string, sent *atomic.Int64) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		block := strings.Repeat(unit, (64<<10)/len(unit))
		for r.Context().Err() == nil {
			n, err := io.WriteString(w, block)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}

// A transport stream holds at most a few MiB for its caller whatever the upstream sends:
// events its decoder drops, or lines that never end an event, past that bound fail the
// attempt as an event too large does (failure.ServerError before the first token, an
// interruption after it).
func TestTransportStreamMemoryIsBoundedWhateverTheUpstreamSends(t *testing.T) {
	roleOnly := `data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n"
	for name, tc := range map[string]struct {
		head, unit string
		class      failure.Class
	}{
		"role-only deltas before the first token": {"", roleOnly, failure.ServerError},
		// Keep-alives: handed over at 1 MiB (maxStreamPrefix), then interrupted.
		"comment lines that end no event, before the first token": {"", ":\n", failure.StreamInterrupted},
		"comment lines that end no event, after the first token":  {roleChunk + chunk("a"), ":\n", failure.StreamInterrupted},
		"fields that end no event, after the first token":         {roleChunk + chunk("a"), "id:1\nevent:x\nretry:1\n", failure.StreamInterrupted},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int64
				c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1", "k1"), llmclient.WithMaxAttempts(1))
				rt := c.Transport(memTransport{hostMux{"a.test": newScript(flood(tc.head, tc.unit, &sent))}})
				resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
				if err == nil {
					_, err = readBody(t, resp)
					if err == nil && resp.StatusCode != http.StatusOK {
						err = &llmclient.Error{Class: failure.ServerError, Status: resp.StatusCode}
					}
				}
				require.Error(t, err)
				assert.Equal(t, tc.class, llmclient.ClassOf(err), "%v", err)
				assert.Less(t, sent.Load(), int64(8<<20), "bytes read from the upstream before the attempt failed")
			})
		})
	}
}
