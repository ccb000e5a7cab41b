package llmclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call that begins after Close fails with ErrClosed even when a middleware (the cache)
// could answer it.
func TestCallsAfterCloseAreRefusedPastTheMiddleware(t *testing.T) {
	ca := memoryCache(t, cache.WithTTL(time.Hour))
	p := fake.New(fake.Reply("hello").Forever())
	c := newClient(t, up("a", p), llmclient.WithMiddleware(ca.Middleware()))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	c.Close()
	resp, err := c.Complete(context.Background(), chatReq("m"))
	assert.ErrorIs(t, err, llmclient.ErrClosed)
	assert.Nil(t, resp)
	s, err := c.Stream(context.Background(), chatReq("m"))
	assert.ErrorIs(t, err, llmclient.ErrClosed)
	if s != nil {
		s.Close()
	}
	assert.Equal(t, 1, p.Calls())
}
