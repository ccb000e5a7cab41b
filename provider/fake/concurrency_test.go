package fake_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

func TestConcurrentCalls(t *testing.T) {
	const workers, perWorker = 16, 50
	p := fake.New(fake.Reply("ok").Times(300), fake.Stream("s").Times(200), fake.Fail(503).Times(200))
	var replies, streams, fails, exhausted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if i%10 == 0 {
					p.Remaining()
					p.Requests()
				}
				var err error
				if (w+i)%2 == 0 {
					var resp *llmclient.Response
					resp, err = p.Complete(context.Background(), call("m"))
					if err == nil {
						if resp.Text == "ok" {
							replies.Add(1)
						} else {
							streams.Add(1)
						}
					}
				} else {
					var st llmclient.ProviderStream
					st, err = p.Stream(context.Background(), call("m"))
					if err == nil {
						c, _ := st.Recv()
						if c.Text == "ok" {
							replies.Add(1)
						} else {
							streams.Add(1)
						}
						st.Close()
					}
				}
				switch {
				case errors.Is(err, fake.ErrExhausted):
					exhausted.Add(1)
				case err != nil:
					fails.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if replies.Load() != 300 || streams.Load() != 200 || fails.Load() != 200 || exhausted.Load() != workers*perWorker-700 {
		t.Errorf("replies %d streams %d fails %d exhausted %d; want 300 200 200 %d",
			replies.Load(), streams.Load(), fails.Load(), exhausted.Load(), workers*perWorker-700)
	}
	if p.Calls() != workers*perWorker || p.Remaining() != 0 {
		t.Errorf("Calls %d Remaining %d", p.Calls(), p.Remaining())
	}
}

// TestConcurrentClose closes streams while their Recv is waiting or about to wait.
func TestConcurrentClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Millisecond).StallAfter(2, time.Hour).KeepAlive(300 * time.Microsecond).Forever())
		var wg sync.WaitGroup
		for i := range 20 {
			st, err := p.Stream(context.Background(), call("m"))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for {
					if _, err := st.Recv(); err != nil {
						if !errors.Is(err, fake.ErrClosed) {
							t.Errorf("Recv = %v, want ErrClosed", err)
						}
						return
					}
				}
			})
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 100 * time.Microsecond)
				st.Close()
				st.Close()
			})
		}
		wg.Wait()
	})
}
