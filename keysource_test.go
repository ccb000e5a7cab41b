package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Credentials from a source, refreshed before they expire, never shown.

// tokenSource hands out "tok-1", "tok-2", … each valid for life; fail makes it fail.
type tokenSource struct {
	life  time.Duration
	calls atomic.Int32
	fail  atomic.Bool
	block chan struct{} // when set, Key waits for it
}

func (s *tokenSource) Key(ctx context.Context) (string, time.Time, error) {
	n := s.calls.Add(1)
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return "", time.Time{}, ctx.Err()
		}
	}
	if s.fail.Load() {
		return "", time.Time{}, errors.New("token endpoint: 503")
	}
	return fmt.Sprintf("tok-%d", n), time.Now().Add(s.life), nil
}

func sourceUp(name string, p llmclient.Provider, src ...keysource.Source) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, KeySources: src})
}

func lastKey(p *fake.Provider) string {
	rs := p.Requests()
	return rs[len(rs)-1].APIKey
}

func TestKeySourceRefreshedBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		src := &tokenSource{life: time.Hour}
		c := newClient(t, sourceUp("vertex", p, src))
		for range 5 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Equal(t, "tok-1", lastKey(p))
		assert.EqualValues(t, 1, src.calls.Load(), "fetched once, then cached")

		time.Sleep(54 * time.Minute) // 6 minutes left: not yet in the 5-minute window
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.EqualValues(t, 1, src.calls.Load())

		time.Sleep(2 * time.Minute) // 4 minutes left
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "tok-2", lastKey(p), "refreshed before it expired")
		assert.EqualValues(t, 2, src.calls.Load())
	})
}

func TestKeySourceShortLifetimeRefreshesAtHalf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		src := &tokenSource{life: 2 * time.Minute}
		c := newClient(t, sourceUp("entra", p, src))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		time.Sleep(59 * time.Second)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "tok-1", lastKey(p))
		time.Sleep(2 * time.Second)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "tok-2", lastKey(p), "a 2-minute token is refreshed after 1 minute")
	})
}

func TestKeySourceFailureKeepsValidCredential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		backup := fake.New(fake.Reply("backup").Forever())
		src := &tokenSource{life: 10 * time.Minute}
		c := newClient(t, sourceUp("vertex", p, src), up("backup", backup))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		src.fail.Store(true)
		time.Sleep(8 * time.Minute) // in the refresh window; the refresh fails
		for range 20 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "vertex", resp.Upstream)
		}
		assert.Equal(t, "tok-1", lastKey(p), "the valid token serves while the refresh fails")
		assert.EqualValues(t, 2, src.calls.Load(), "a failed refresh is retried at most once a second")

		time.Sleep(3 * time.Minute) // expired, and the source still fails
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream, "no credential: the call fails over")
		require.NotEmpty(t, resp.Attempts)
		first := resp.Attempts[0]
		assert.Equal(t, failure.Unavailable, first.Class)
		assert.ErrorIs(t, first.Err, keysource.ErrFailed)
		assert.ErrorIs(t, first.Err, llmclient.ErrNoKey)

		src.fail.Store(false)
		time.Sleep(2 * time.Second)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(lastKey(p), "tok-"), "a working source serves again")
		assert.NotEqual(t, "tok-1", lastKey(p))
	})
}

func TestKeySourceOneRefreshForManyCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		src := &tokenSource{life: time.Hour, block: make(chan struct{})}
		c := newClient(t, sourceUp("vertex", p, src))
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Complete(context.Background(), chatReq("m"))
				assert.NoError(t, err)
			}()
		}
		synctest.Wait()
		assert.EqualValues(t, 1, src.calls.Load(), "one caller fetches, the others wait for it")
		assert.Zero(t, p.Calls())
		close(src.block)
		wg.Wait()
		assert.Equal(t, 8, p.Calls())
		for _, r := range p.Requests() {
			assert.Equal(t, "tok-1", r.APIKey)
		}
	})
}

func TestKeySourceWaitEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		src := &tokenSource{life: time.Hour, block: make(chan struct{})}
		c := newClient(t, sourceUp("vertex", p, src))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Complete(ctx, chatReq("m"))
		require.Error(t, err)
		assert.Equal(t, 3*time.Second, time.Since(start), "a hung source does not outlive the deadline")
		assert.Zero(t, p.Calls())
		close(src.block)
	})
}

func TestKeySourceBadSources(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	_, err := llmclient.New(sourceUp("a", p, nil))
	require.Error(t, err, "a nil source")

	panicky := keysource.Func(func(context.Context) (string, time.Time, error) { panic("boom") })
	empty := keysource.Func(func(context.Context) (string, time.Time, error) { return "", time.Time{}, nil })
	for name, src := range map[string]keysource.Source{"panics": panicky, "empty": empty} {
		c := newClient(t, sourceUp("a", p, src), llmclient.WithMaxAttempts(1))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err, name)
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err), name)
		assert.ErrorIs(t, err, keysource.ErrFailed, name)
	}
	assert.Zero(t, p.Calls())
}

func TestKeySourceNeverShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A careless upstream echoes the credential in its error message.
		p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
			return fake.Fail(500).Message("internal error for token " + call.APIKey)
		}).Forever())
		src := &tokenSource{life: 2 * time.Minute}
		var log eventLog
		c := newClient(t, sourceUp("a", p, src), llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe))
		var shown strings.Builder
		for range 3 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.Error(t, err)
			fmt.Fprintf(&shown, "%v %+v %#v\n", err, err, err)
			time.Sleep(90 * time.Second) // the next call refreshes the token
		}
		require.GreaterOrEqual(t, src.calls.Load(), int32(3))
		for _, e := range log.events {
			fmt.Fprintf(&shown, "%+v\n", e)
		}
		u := llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{src}}
		fmt.Fprintf(&shown, "%v %+v %#v\n", u, u, u)
		var buf strings.Builder
		slog.New(slog.NewTextHandler(&buf, nil)).Info("up", "upstream", u)
		shown.WriteString(buf.String())
		for i := int32(1); i <= src.calls.Load(); i++ {
			assert.NotContains(t, shown.String(), fmt.Sprintf("tok-%d", i))
		}
		assert.Contains(t, shown.String(), "internal error for token", "the message is kept, the token redacted")
	})
}

func TestUpdateKeySources(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	old := &tokenSource{life: time.Hour}
	c := newClient(t, sourceUp("a", p, old))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	// The same source value keeps its key and credential through a limits change.
	require.NoError(t, c.Update(llmclient.SetKeySources("a", old), llmclient.SetLimits("a", llmclient.Limits{RPM: 600})))
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, old.calls.Load())
	rotated := keysource.Func(func(context.Context) (string, time.Time, error) { return "rotated", time.Time{}, nil })
	require.NoError(t, c.Update(llmclient.SetKeySources("a", rotated)))
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "rotated", lastKey(p))
	assert.Equal(t, []string{"key#2 ready"}, keyLabels(c, 0))
}

// Without a deadline, a source that never answers (it waits on its context) is ended by
// the call's time budget (WithCallBudget, 10m by default), and so are the callers
// waiting for its refresh.
func TestKeySourceHungWithoutDeadlineEndsWithTheCallBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		src := &tokenSource{life: time.Hour, block: make(chan struct{})}
		defer close(src.block)
		c := newClient(t, sourceUp("vertex", p, src))
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				_, err := c.Complete(context.Background(), chatReq("m"))
				assert.Error(t, err)
				assert.LessOrEqual(t, time.Since(start), 10*time.Minute, "the default call budget ends the wait")
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 1, src.calls.Load(), "one caller fetched, the others waited for it")
		assert.Zero(t, p.Calls())
	})
}
