package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
)

// pausedInStore returns a replica b of a Client whose upstream u's keys replica a paused
// for 30 s in their shared store, one 429 with Retry-After each; pb is b's provider.
func pausedInStore(t *testing.T, limits llmclient.Limits, keys ...string) (b *llmclient.Client, pb *fake.Provider) {
	store := limitstore.NewMemory()
	pa := fake.New(fake.Fail(429).RetryAfter(30 * time.Second).Forever())
	a := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: pa, Keys: keys, Limits: limits}),
		llmclient.WithLimitStore(store), llmclient.WithMaxAttempts(len(keys)))
	if _, err := a.Complete(context.Background(), chatReq("m")); err == nil {
		t.Fatal("replica a: no error from a provider answering 429")
	}
	if pa.Calls() != len(keys) {
		t.Fatalf("replica a called %d keys, want %d", pa.Calls(), len(keys))
	}
	pb = fake.New(fake.Reply("ok").Forever())
	b = newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: pb, Keys: keys, Limits: limits}),
		llmclient.WithLimitStore(store))
	return b, pb
}

// Every key with Limits paused in the store: another replica's first call waits for the
// pause in the key's limiter, as its later calls do, rather than fail at once.
func TestSharedPauseOfEveryKeyIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, pb := pausedInStore(t, llmclient.Limits{RPM: 600}, "k1", "k2")
		for i := range 2 {
			var err error
			d := elapsed(func() { _, err = b.Complete(context.Background(), chatReq("m")) })
			if err != nil {
				t.Fatalf("call %d after %v: %v", i+1, d, err)
			}
			if i == 0 && (d < 29*time.Second || d > 31*time.Second) {
				t.Errorf("first call admitted after %v, want the pause's 30s", d)
			}
		}
		if pb.Calls() != 2 {
			t.Errorf("b called the upstream %d times, want 2", pb.Calls())
		}
	})
}

// The same, with a deadline the pause does not fit: the refusal says when the keys come
// back (AdmitAfter).
func TestSharedPauseOfEveryKeyRefusalSaysWhen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, pb := pausedInStore(t, llmclient.Limits{RPM: 600}, "k1", "k2")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		d := elapsed(func() { _, err = b.Complete(ctx, chatReq("m")) })
		var e *llmclient.Error
		if !errors.As(err, &e) {
			t.Fatalf("err %v", err)
		}
		if d != 0 || e.AdmitAfter < 25*time.Second || e.AdmitAfter > 31*time.Second || pb.Calls() != 0 {
			t.Errorf("refused after %v with AdmitAfter %v, %d calls (%v); want at once, about 30s, none", d, e.AdmitAfter, pb.Calls(), err)
		}
	})
}

// A key without Limits paused in the store, with a deadline the pause does not fit: the
// refusal carries AdmitAfter, as the key layer's refusal of a cooling key does.
func TestSharedPauseRefusalWithoutLimitsSaysWhen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, pb := pausedInStore(t, llmclient.Limits{}, "k1")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := b.Complete(ctx, chatReq("m"))
		var e *llmclient.Error
		if !errors.As(err, &e) {
			t.Fatalf("err %v", err)
		}
		if e.AdmitAfter < 29*time.Second || e.AdmitAfter > 30*time.Second || pb.Calls() != 0 {
			t.Errorf("refusal %v: AdmitAfter %v, %d calls; want about 30s, none", err, e.AdmitAfter, pb.Calls())
		}
	})
}
