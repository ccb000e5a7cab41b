package llmclient_test

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/llmclient/llmclient"
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
			attempts := log.kinds(llmclient.EventAttempt)
			require.Len(t, attempts, 1)
			assert.Equal(t, llmclient.ClassRateLimited, attempts[0].Class)
			require.Error(t, attempts[0].Err)
			assert.Contains(t, attempts[0].Err.Error(), "Rate limit reached", "the classifier read the decoded body")
		})
	}
}
