package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// event.Call's TimePerChunk is the mean time between a stream's chunks, from the first to
// the last: the wait an idle timeout ended after the last chunk is no chunk's.
func TestTimePerChunkEndsAtTheLastChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		p := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).StallAfter(3, time.Hour))
		c := newClient(t, up("a", p), llmclient.WithObserver(log.observe), llmclient.WithMaxAttempts(1),
			llmclient.WithIdleTimeout(10*time.Second))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		assert.Equal(t, "abc", text)
		require.ErrorIs(t, err, llmclient.ErrIdleTimeout)
		calls := log.kinds(event.Call)
		require.Len(t, calls, 1)
		assert.Equal(t, 3, calls[0].Chunks)
		assert.Equal(t, time.Second, calls[0].TimePerChunk)
	})
}
