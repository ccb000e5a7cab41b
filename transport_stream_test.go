package llmclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const streamBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestTransportStreamGuardBeforeFirstToken(t *testing.T) {
	good := sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{time.Second, chunk("lo")}, ev{0, stopChunk}, ev{0, done})
	tests := []struct {
		name  string
		first func(http.ResponseWriter, *http.Request)
		class failure.Class
	}{
		{"stall after role chunk", sseStep(ev{0, roleChunk}, ev{-1, ""}), failure.Timeout},
		{"keep-alives only", sseStep(ev{0, ": keep-alive\n\n"}, ev{20 * time.Second, ": keep-alive\n\n"}, ev{20 * time.Second, ": keep-alive\n\n"}, ev{-1, ""}), failure.Timeout},
		{"in-band error", sseStep(ev{0, roleChunk}, ev{0, `data: {"error":{"message":"The server is overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"}), failure.Overloaded},
		{"cut before content", sseStep(ev{0, roleChunk}), failure.Network},
		{"503 status", status(503, err503), failure.ServerError},
		// A content event dripped a byte a second never completes: bytes are not a token.
		{"slow drip", sseStep(append([]ev{{0, roleChunk}}, drip(chunk("Hel"), time.Second)...)...), failure.Timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tt.first, good)
				var log eventLog
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"),
					llmclient.WithFirstTokenTimeout(30*time.Second), llmclient.WithObserver(log.observe))
				ct := &countingTransport{base: memTransport{up}}
				resp, err := post(t, context.Background(), c.Transport(ct), "http://oai.test/v1/chat/completions", streamBody)
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				body, err := readBody(t, resp)
				require.NoError(t, err)
				assert.Equal(t, roleChunk+chunk("Hel")+chunk("lo")+stopChunk+done, body, "the second stream, byte for byte")
				synctest.Wait()
				attempts := log.kinds(event.Attempt)
				require.Len(t, attempts, 2)
				assert.Equal(t, tt.class, attempts[0].Class)
				assert.Equal(t, failure.None, attempts[1].Class)
				assert.Equal(t, ct.opened.Load(), ct.closed.Load())
				assert.Equal(t, 0, c.InFlight("oai"), "the slot is released at the end")
			})
		})
	}
}

func TestTransportStreamAfterFirstToken(t *testing.T) {
	tests := []struct {
		name    string
		step    func(http.ResponseWriter, *http.Request)
		want    string
		wantErr error
	}{
		{"idle timeout", sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{-1, ""}), roleChunk + chunk("Hel"), llmclient.ErrIdleTimeout},
		// Keep-alives every 6s pass through to the caller but do not restart the 10s wait
		// for data (WithKeepAliveResetsIdle is off by default): cut at 10s, after one.
		{"keep-alives only", sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{6 * time.Second, ": ping\n\n"},
			ev{6 * time.Second, ": ping\n\n"}, ev{6 * time.Second, ": ping\n\n"}, ev{-1, ""}),
			roleChunk + chunk("Hel") + ": ping\n\n", llmclient.ErrIdleTimeout},
		{"cut without [DONE]", sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}), roleChunk + chunk("Hel"), io.ErrUnexpectedEOF},
		// The next event dripped a byte a second from 0.5s: the idle timer counts events,
		// not bytes; the 10 bytes read pass through, then the interruption (before, a clean
		// EOF after them).
		{"slow drip", sseStep(append([]ev{{0, roleChunk}, {0, chunk("Hel")}, {500 * time.Millisecond, "d"}},
			drip(chunk("lo")[1:], time.Second)...)...),
			roleChunk + chunk("Hel") + `data: {"id`, llmclient.ErrIdleTimeout},
		// The upstream cut the connection inside an event: the partial event passes
		// through, then the interruption (before, a clean EOF).
		{"cut inside an event", sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{0, `data: {"id":"s1","obj`}),
			roleChunk + chunk("Hel") + `data: {"id":"s1","obj`, llmclient.ErrStreamInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tt.step)
				var log eventLog
				// Without continuation (WithStreamContinuation(false)), a break after the first
				// token ends the body (transport_continue_test.go has the continued ones).
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamContinuation(false),
					llmclient.WithIdleTimeout(10*time.Second), llmclient.WithObserver(log.observe))
				ct := &countingTransport{base: memTransport{up}}
				resp, err := post(t, context.Background(), c.Transport(ct), "http://oai.test/v1/chat/completions", streamBody)
				require.NoError(t, err)
				body, err := readBody(t, resp)
				assert.Equal(t, tt.want, body, "everything before the break is delivered")
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.wantErr)
				assert.ErrorIs(t, err, llmclient.ErrStreamInterrupted)
				assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
				assert.Equal(t, 1, up.count(), "never retried after the first token")
				synctest.Wait()
				attempts := log.kinds(event.Attempt)
				require.Len(t, attempts, 1)
				assert.Equal(t, failure.StreamInterrupted, attempts[0].Class)
				assert.Equal(t, ct.opened.Load(), ct.closed.Load())
				assert.Equal(t, 0, c.InFlight("oai"))
			})
		})
	}
}

func TestTransportStreamInBandErrorAfterFirstTokenReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errEvent := `data: {"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"
		up := newScript(sseStep(ev{0, chunk("Hel")}, ev{0, errEvent}))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamContinuation(false),
			llmclient.WithObserver(log.observe))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err, "the SDK reads the error event itself")
		assert.Equal(t, chunk("Hel")+errEvent, body)
		attempts := log.kinds(event.Attempt)
		require.Len(t, attempts, 1)
		assert.Equal(t, failure.StreamInterrupted, attempts[0].Class)
	})
}

func TestTransportStreamLastInBandErrorIsReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errEvent := `data: {"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"
		up := newScript(sseStep(ev{0, roleChunk}, ev{0, errEvent}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, roleChunk+errEvent, body, "the caller's SDK sees the vendor's error event")
		assert.Equal(t, 2, up.count())
	})
}

func TestTransportStreamCloseEarlyReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(sseStep(ev{0, chunk("a")}, ev{time.Second, chunk("b")}, ev{-1, ""}))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		ct := &countingTransport{base: memTransport{up}}
		resp, err := post(t, context.Background(), c.Transport(ct), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = resp.Body.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, 1, c.InFlight("oai"))
		require.NoError(t, resp.Body.Close())
		require.NoError(t, resp.Body.Close(), "idempotent")
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("oai"))
		assert.Equal(t, ct.opened.Load(), ct.closed.Load())
		attempts := log.kinds(event.Attempt)
		require.Len(t, attempts, 1)
		assert.Equal(t, failure.Canceled, attempts[0].Class)
	})
}

func TestTransportStreamTotalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(sseStep(ev{0, chunk("a")}, ev{5 * time.Second, chunk("b")}, ev{5 * time.Second, chunk("c")}, ev{5 * time.Second, done}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamTimeout(12*time.Second))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		assert.Equal(t, chunk("a")+chunk("b")+chunk("c"), body)
		assert.True(t, errors.Is(err, llmclient.ErrStreamTimeout), "got %v", err)
	})
}

func TestTransportResponsesStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"status\":\"in_progress\"}}\n\n"
		delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\",\"output_index\":0}\n\n"
		completed := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n"
		failed := "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\"}\n\n"
		up := newScript(sseStep(ev{0, created}, ev{0, failed}), sseStep(ev{0, created}, ev{0, delta}, ev{0, completed}))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/responses",
			`{"model":"gpt-4o","stream":true,"input":"hi"}`)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, created+delta+completed, body)
		attempts := log.kinds(event.Attempt)
		require.Len(t, attempts, 2)
		assert.Equal(t, failure.RateLimited, attempts[0].Class)
		assert.Equal(t, 3, attempts[1].InputTokens, "usage from response.completed")
	})
}

func TestTransportStreamCloseUnblocksARead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(sseStep(ev{0, chunk("a")}, ev{0, `data: {"id":"s1","choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}` + "\n\n"}, ev{-1, ""}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithIdleTimeout(0))
		ct := &countingTransport{base: memTransport{up}}
		resp, err := post(t, context.Background(), c.Transport(ct), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		readErr := make(chan error)
		go func() {
			_, err := io.ReadAll(resp.Body)
			readErr <- err
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, resp.Body.Close())
		assert.Error(t, <-readErr, "the blocked read ends")
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("oai"))
		assert.Equal(t, ct.opened.Load(), ct.closed.Load())
	})
}

// drip sends data one byte at a time, every gap.
func drip(data string, gap time.Duration) []ev {
	out := make([]ev, len(data))
	for i := range data {
		out[i] = ev{gap, data[i : i+1]}
	}
	return out
}
