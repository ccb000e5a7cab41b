package llmclient_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An error response with Content-Encoding: deflate carries the zlib format (RFC 9110
// 8.4.1.2): its body reaches the classifier, and the caller, decoded. It was read as raw
// DEFLATE, which fails on the zlib header, and the caller got an empty body. Raw DEFLATE,
// which some servers send under that name, is still decoded.
func TestTransportDeflateErrorBodyIsDecoded(t *testing.T) {
	const body = `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`
	zlibbed := func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) }
	raw := func(w io.Writer) io.WriteCloser { fw, _ := flate.NewWriter(w, flate.BestCompression); return fw }
	for name, enc := range map[string]func(io.Writer) io.WriteCloser{"zlib": zlibbed, "raw deflate": raw} {
		t.Run(name, func(t *testing.T) {
			var z bytes.Buffer
			zw := enc(&z)
			_, _ = io.WriteString(zw, body)
			require.NoError(t, zw.Close())
			up := newScript(status(429, z.String(), "Content-Encoding", "deflate", "Content-Length", strconv.Itoa(z.Len())))
			var log eventLog
			c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1),
				llmclient.WithObserver(log.observe))
			resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions",
				`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
			require.NoError(t, err)
			got, err := readBody(t, resp)
			require.NoError(t, err)
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, body, got)
			assert.Empty(t, resp.Header.Get("Content-Encoding"))
			attempts := log.kinds(event.Attempt)
			require.Len(t, attempts, 1)
			assert.Equal(t, failure.RateLimited, attempts[0].Class)
			require.Error(t, attempts[0].Err)
			assert.Contains(t, attempts[0].Err.Error(), "Rate limit reached", "the classifier read the decoded body")
		})
	}
}

// A stream the caller asked to be compressed (Accept-Encoding: gzip, which the base
// transport then leaves to it) is guarded all the same: the guard reads its events
// decoded, the caller gets the bytes as they came. The decoder read the compressed bytes
// as events, and every attempt failed as cut before its end.
func TestTransportEncodedStreamIsGuarded(t *testing.T) {
	const inBandError = `data: {"error":{"message":"The server is overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"
	const good = roleChunk + "data: {\"id\":\"s1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" + stopChunk + done
	encoders := map[string]func(io.Writer) io.WriteCloser{
		"gzip":    func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		"deflate": func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
	}
	for name, enc := range encoders {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				compress := func(s string) []byte {
					var z bytes.Buffer
					zw := enc(&z)
					_, _ = io.WriteString(zw, s)
					require.NoError(t, zw.Close())
					return z.Bytes()
				}
				encoded := func(data []byte) func(http.ResponseWriter, *http.Request) {
					return func(w http.ResponseWriter, r *http.Request) {
						w.Header().Set("Content-Type", "text/event-stream")
						w.Header().Set("Content-Encoding", name)
						_, _ = w.Write(data)
					}
				}
				want := compress(good)
				up := newScript(encoded(compress(roleChunk+inBandError)), encoded(want))
				var log eventLog
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
				resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions",
					streamBody, "Accept-Encoding", name)
				require.NoError(t, err)
				assert.Equal(t, name, resp.Header.Get("Content-Encoding"))
				got, err := readBody(t, resp)
				require.NoError(t, err)
				assert.Equal(t, want, []byte(got), "the second stream, as it came")
				synctest.Wait()
				at := log.kinds(event.Attempt)
				require.Len(t, at, 2)
				assert.Equal(t, failure.Overloaded, at[0].Class, "the guard read the first stream's in-band error")
				assert.Equal(t, failure.None, at[1].Class)
				assert.Equal(t, 0, c.InFlight("oai"))
			})
		})
	}
}

// A one-shot answer the caller asked compressed is priced from the usage in its decoded
// body, not from an estimate: the usage was read from the compressed bytes, and missed.
func TestTransportEncodedResponseIsPricedFromItsUsage(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = io.WriteString(zw, chatOK)
	require.NoError(t, zw.Close())
	up := newScript(status(200, z.String(), "Content-Encoding", "gzip"))
	var log eventLog
	c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe), llmclient.WithPricing(nil))
	resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions",
		`{"model":"gpt-4o","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`, "Accept-Encoding", "gzip")
	require.NoError(t, err)
	got, err := readBody(t, resp)
	require.NoError(t, err)
	assert.Equal(t, z.String(), got, "the caller gets the bytes as they came")
	m, ok := pricing.Default().Lookup("openai", "gpt-4o")
	require.True(t, ok)
	want := costOf(t, m, pricing.Tokens{Input: 5, Output: 1}, time.Now())
	at := log.kinds(event.Attempt)
	require.Len(t, at, 1)
	assert.True(t, at[0].Cost.Known)
	assert.Equal(t, want, at[0].Cost.Amount, "priced from chatOK's usage: 5 in, 1 out")
}

// An in-band error event after the first token of a compressed stream reaches the caller
// in the bytes, as in a plain one, when the stream ends at the event's end: the end was
// looked for in the compressed bytes, and Read failed with an interruption instead.
func TestTransportEncodedStreamInBandErrorReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errEvent := `data: {"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = io.WriteString(zw, chunk("Hel")+errEvent)
		require.NoError(t, zw.Close())
		up := newScript(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(z.Bytes())
		})
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions",
			streamBody, "Accept-Encoding", "gzip")
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err, "the SDK reads the error event itself")
		assert.Equal(t, z.String(), body)
		attempts := log.kinds(event.Attempt)
		require.Len(t, attempts, 1)
		assert.Equal(t, failure.StreamInterrupted, attempts[0].Class)
	})
}
