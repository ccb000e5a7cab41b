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
// passes, and its last waiter leaves, gets an answer: either it joined in time and its
// later deadline extends the call, or the call was already over and it makes its own. It
// never gets the end of a deadline it extended (the timer had fired and canceled the call
// after the join), nor the cancellation of a call it joined (the last waiter out canceled
// it after the join). The moments coincide in virtual time; the runs try the orders the
// scheduler picks.
func TestDedupJoinAtTheDeadline(t *testing.T) {
	for _, others := range []int{1, 2} {
		for range 200 {
			synctest.Test(t, func(t *testing.T) {
				c, _ := newCache(t, cache.WithDedup(true), cache.WithTTL(0))
				p := fake.New(fake.Reply("answer").Latency(3 * time.Second).Forever())
				cl := client(t, p, c.Middleware())
				var gone []<-chan result
				for i := range others { // all of them give up at 1s
					at := time.Duration(i) * 500 * time.Millisecond
					gone = append(gone, callAt(cl, at, chat("hi"), timeout(time.Second-at)))
				}
				late := callAt(cl, time.Second, chat("hi"), timeout(5*time.Second))
				for _, g := range gone {
					<-g
				}
				r := <-late
				require.NoError(t, r.err)
				require.Equal(t, "answer", r.resp.Text)
			})
		}
	}
}
