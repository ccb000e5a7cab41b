package llmclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
)

// peakSource counts how many of its Key calls run at once; its first call waits for
// release.
type peakSource struct {
	cur, peak atomic.Int32
	first     atomic.Bool
	release   chan struct{}
}

func (s *peakSource) Key(context.Context) (string, time.Time, error) {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if s.first.CompareAndSwap(false, true) {
		<-s.release
	}
	return "tok", time.Now().Add(time.Hour), nil
}

// The Client never calls one source twice at once, across an Update that keeps it.
func TestKeySourceNeverCalledTwiceAtOnceAcrossUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur, peak atomic.Int32
		release := make(chan struct{})
		var first atomic.Bool
		src1 := keysource.Func(func(ctx context.Context) (string, time.Time, error) {
			n := cur.Add(1)
			defer cur.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if first.CompareAndSwap(false, true) {
				<-release
			}
			return "tok", time.Now().Add(time.Hour), nil
		})
		src2 := keysource.Func(func(context.Context) (string, time.Time, error) {
			return "tok2", time.Now().Add(time.Hour), nil
		})
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{src1}}))
		done := make(chan struct{})
		go func() { _, _ = c.Complete(context.Background(), chatReq("m")); close(done) }()
		synctest.Wait() // src1.Key is running
		if err := c.Update(llmclient.SetKeySources("a", src1, src2)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		close(release)
		<-done
		if peak.Load() > 1 {
			t.Fatalf("source called %d times at once", peak.Load())
		}
	})
}

// A source removed while it fetches and set again is not called by its new key while the
// old one still fetches; nor is a source listed twice called by both its keys at once.
func TestKeySourceNeverCalledTwiceAtOnceReAdded(t *testing.T) {
	for name, lists := range map[string]func(s, other keysource.Source) [][]keysource.Source{
		"removed and set again": func(s, other keysource.Source) [][]keysource.Source {
			return [][]keysource.Source{{other}, {s, other}}
		},
		"listed twice": func(s, _ keysource.Source) [][]keysource.Source { return [][]keysource.Source{{s, s}} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &peakSource{release: make(chan struct{})}
				other := keysource.Func(func(context.Context) (string, time.Time, error) { return "other", time.Time{}, nil })
				p := fake.New(fake.Reply("ok").Forever())
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{src}}))
				first := make(chan error, 1)
				go func() { _, err := c.Complete(context.Background(), chatReq("m")); first <- err }()
				synctest.Wait() // src.Key is running for key#1
				for _, l := range lists(src, other) {
					if err := c.Update(llmclient.SetKeySources("a", l...)); err != nil {
						t.Fatal(err)
					}
				}
				second := make(chan error, 1)
				go func() { _, err := c.Complete(context.Background(), chatReq("m")); second <- err }()
				synctest.Wait()
				close(src.release)
				for _, ch := range []chan error{first, second} {
					if err := <-ch; err != nil {
						t.Error(err)
					}
				}
				if n := src.peak.Load(); n > 1 {
					t.Fatalf("source called %d times at once", n)
				}
			})
		})
	}
}
