package llmclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A source that ignores its context holds a goroutine of its own, never a call: callers
// wait for its refresh at most a minute (and their deadline), then fail with ErrNoKey
// wrapping keysource.ErrFailed, at once while it still runs; its result is used when it
// returns, and it is never called twice at once.

// deafSource blocks in Key, ignoring its context, until release is closed, on its first
// call only; it counts its calls and how many run at once.
type deafSource struct {
	release   chan struct{}
	life      time.Duration // zero: its credential never expires
	calls     atomic.Int32
	cur, peak atomic.Int32
}

func (s *deafSource) Key(context.Context) (string, time.Time, error) {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if s.calls.Add(1) == 1 {
		<-s.release // a token endpoint whose HTTP client has no timeout
	}
	var exp time.Time
	if s.life > 0 {
		exp = time.Now().Add(s.life)
	}
	return "tok", exp, nil
}

// completeAsync runs Complete on its own goroutine; the channel has its error and how
// long it took.
func completeAsync(c *llmclient.Client) <-chan timedErr {
	ch := make(chan timedErr, 1)
	start := time.Now()
	go func() {
		_, err := c.Complete(context.Background(), chatReq("m"))
		ch <- timedErr{err, time.Since(start)}
	}()
	return ch
}

type timedErr struct {
	err  error
	took time.Duration
}

func TestKeySourceIgnoringItsContextDoesNotHoldTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &deafSource{release: make(chan struct{})}
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, sourceUp("a", p, src))
		r := <-completeAsync(c)
		require.Error(t, r.err)
		assert.ErrorIs(t, r.err, llmclient.ErrNoKey)
		assert.ErrorIs(t, r.err, keysource.ErrFailed)
		assert.LessOrEqual(t, r.took, time.Minute+10*time.Second, "the caller stops waiting a minute after the refresh started")
		assert.NotContains(t, r.err.Error(), "tok")
		assert.Zero(t, p.Calls())

		close(src.release)
		synctest.Wait() // the hung refresh returns and stores its credential
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "tok", lastKey(p))
		assert.EqualValues(t, 1, src.calls.Load(), "the late result is used, the source not asked again")
	})
}

// While a refresh hangs, callers whose credential has expired fail at once rather than
// each waiting out its budget; the source is not called again while it hangs, and the
// upstream is back as soon as it returns.
func TestKeySourceHungRefreshFailsCallersFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &deafSource{release: make(chan struct{})}
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, sourceUp("a", p, src))
		first := completeAsync(c)
		time.Sleep(100 * time.Hour)
		r := <-first
		require.Error(t, r.err)

		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := <-completeAsync(c)
				assert.ErrorIs(t, r.err, llmclient.ErrNoKey)
				assert.ErrorIs(t, r.err, keysource.ErrFailed)
				assert.Less(t, r.took, 10*time.Second, "a refresh hung for 100h fails the call at once")
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 1, src.calls.Load(), "a hung source is not called again")
		assert.Zero(t, p.Calls())

		close(src.release)
		synctest.Wait()
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.EqualValues(t, 1, src.calls.Load())
		assert.EqualValues(t, 1, src.peak.Load())
	})
}

// A refresh that hangs while the credential is still valid leaves the calls on the
// current credential until it expires; then they fail fast.
func TestKeySourceHungRefreshKeepsTheValidCredential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		release := make(chan struct{})
		src := keysource.Func(func(context.Context) (string, time.Time, error) {
			if n.Add(1) == 2 {
				<-release // the first refresh hangs, ignoring its context
			}
			return "tok", time.Now().Add(time.Hour), nil
		})
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, sourceUp("a", p, src))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		time.Sleep(56 * time.Minute) // within the refresh window
		r := <-completeAsync(c)
		require.NoError(t, r.err, "the caller that refreshes goes on with the valid credential")
		assert.LessOrEqual(t, r.took, time.Minute)
		r = <-completeAsync(c)
		require.NoError(t, r.err)
		assert.Zero(t, r.took, "the others do not wait")

		time.Sleep(5 * time.Minute) // expired
		r = <-completeAsync(c)
		assert.ErrorIs(t, r.err, keysource.ErrFailed)
		assert.Less(t, r.took, 10*time.Second)
		assert.EqualValues(t, 2, n.Load())

		close(release)
		synctest.Wait()
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.EqualValues(t, 2, n.Load())
	})
}
