package rediscache_test

import (
	"testing"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two builds share a Redis during a rolling deploy that changes the exact key's encoding
// (here WithKeyMetadata, as a change of the key's version would) but not the idempotency
// key's: the caller's retry, routed to the new build, replays the first answer. It was
// refused as another request, the record's fingerprint being the old build's exact key.
func TestIdempotentRetryAcrossADeploy(t *testing.T) {
	srv := startRedis(t)
	stA, _ := srv.store()
	stB, _ := srv.store()
	ca, err := cache.New(stA, cache.WithStoreTimeout(2*time.Second))
	require.NoError(t, err)
	cb, err := cache.New(stB, cache.WithStoreTimeout(2*time.Second), cache.WithKeyMetadata("prompt_version"))
	require.NoError(t, err)
	a := newClient(t, ca, fake.New(fake.Reply("first").Forever()))
	b := newClient(t, cb, fake.New(fake.Reply("second").Forever()))

	ik := cache.WithIdempotencyKey(ctx(t), "job-42")
	r, err := a.Complete(ik, chat("same request"))
	require.NoError(t, err)
	require.Equal(t, "first", r.Text)
	require.NoError(t, ca.Flush(ctx(t)))

	r, err = b.Complete(ik, chat("same request"))
	require.NoError(t, err, "the same request under the same key is refused")
	assert.Equal(t, "first", r.Text)
	_, err = b.Complete(ik, chat("another request"))
	assert.ErrorIs(t, err, cache.ErrIdempotencyMismatch)
}
