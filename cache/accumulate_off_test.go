package cache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestStreamWithoutAccumulationStoresTheContent: with WithStreamAccumulate(false) the
// stream's Response carries no content, yet the exact and the semantic cache store the
// answer the caller read, so a later Complete of the same request (or a similar
// question) gets the text, not "" marked Cached; a later Stream replays the chunks.
func TestStreamWithoutAccumulationStoresTheContent(t *testing.T) {
	exact, _ := newCache(t)
	sem := newSemantic(t, &conceptEmbedder{})
	for _, tc := range []struct {
		name   string
		mw     llmclient.Middleware
		first  string
		second string
	}{
		{"exact", exact.Middleware(), refund, refund},
		{"semantic", sem.Middleware(), refund, refundAgain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fake.New(fake.Stream("Send it ", "back within 30 days.").Usage(9, 8).Forever())
			cl := client(t, p, tc.mw, llmclient.WithStreamAccumulate(false))
			s, err := cl.Stream(context.Background(), chat(tc.first))
			require.NoError(t, err)
			_, err = readAll(t, s)
			require.NoError(t, err)
			require.Empty(t, s.Response().Text, "the stream keeps no content")

			resp, err := cl.Complete(context.Background(), chat(tc.second))
			require.NoError(t, err)
			assert.True(t, resp.Cached)
			assert.Equal(t, "Send it back within 30 days.", resp.Text)
			assert.Equal(t, 1, p.Calls())

			s, err = cl.Stream(context.Background(), chat(tc.second))
			require.NoError(t, err)
			chunks, err := readAll(t, s)
			require.NoError(t, err)
			text := ""
			for _, ch := range chunks {
				text += ch.Text
			}
			assert.Equal(t, "Send it back within 30 days.", text)
			assert.Equal(t, 1, p.Calls())
		})
	}
}
