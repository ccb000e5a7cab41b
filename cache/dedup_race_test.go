package cache_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/require"
)

// A caller that joins a shared call at the very moment the latest deadline of its waiters
// passes gets an answer: either it joined in time and its later deadline extends the
// call, or the call was already over and it makes its own. It never inherits the end of
// a deadline it extended (the timer had fired, and canceled the call after the join).
// The moments coincide in virtual time; the runs try the orders the scheduler picks.
func TestDedupJoinAtTheDeadline(t *testing.T) {
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			c, _ := newCache(t, cache.WithDedup(true), cache.WithTTL(0))
			p := fake.New(fake.Reply("answer").Latency(3 * time.Second).Forever())
			cl := client(t, p, c.Middleware())
			a := callAt(cl, 0, chat("hi"), timeout(time.Second))
			b := callAt(cl, 500*time.Millisecond, chat("hi"), timeout(500*time.Millisecond))
			late := callAt(cl, time.Second, chat("hi"), timeout(5*time.Second))
			<-a
			<-b
			r := <-late
			require.NoError(t, r.err)
			require.Equal(t, "answer", r.resp.Text)
		})
	}
}
