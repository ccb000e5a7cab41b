package llmclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A long window taught by one lying answer is forgotten by the next successful answer
// that reports no quota, an embedding's as a completion's: a key whose traffic is then
// only embeddings is not throttled to a request an hour until the lie's reset.
func TestLyingRateLimitHeadersForgottenOnAnEmbeddingWithout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lying := lyingOnce()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/embeddings") {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"object":"list","model":"text-embedding-3-small","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":2,"total_tokens":2}}`))
				return
			}
			lying(w, r)
		})
		c := newClient(t, openaiOver(t, "a", h, "k1"))
		_, err := c.Complete(context.Background(), chatReq("gpt-4o"))
		require.NoError(t, err)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
			d := elapsed(func() {
				_, err := c.Embed(ctx, &llmclient.EmbedRequest{Model: "text-embedding-3-small", Input: []string{"hi"}})
				require.NoError(t, err)
			})
			cancel()
			if i == 0 {
				assert.LessOrEqual(t, d, time.Hour+time.Minute, "embedding %d waited", i+1)
			} else {
				assert.Zero(t, d, "embedding %d waited: the window no answer reports any more is forgotten", i+1)
			}
		}
	})
}
