package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After its breaker closes, an upstream takes its traffic back gradually.
func TestRecoveryRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Fail(500).Times(3), fake.Reply("primary").Forever())
		secondary := fake.New(fake.Reply("secondary").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), llmclient.WithMaxAttempts(1),
			llmclient.WithRecoveryRamp(10*time.Second),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 3, OpenTimeout: 10 * time.Second,
				HalfOpenProbes: 1, SuccessesToClose: 1}))
		served := func(n int, every time.Duration) map[string]int {
			got := map[string]int{}
			for range n {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
				got[resp.Upstream]++
				time.Sleep(every)
			}
			return got
		}
		assert.Equal(t, map[string]int{"secondary": 3}, served(3, 0), "three failures fail over and open the breaker")
		time.Sleep(10 * time.Second)
		assert.Equal(t, map[string]int{"primary": 1}, served(1, 0), "the probe closes the breaker")

		// The first second of the ramp: about one call a second goes to the primary.
		first := served(100, 10*time.Millisecond)
		assert.GreaterOrEqual(t, first["primary"], 1)
		assert.LessOrEqual(t, first["primary"], 3)
		assert.Equal(t, 100, first["primary"]+first["secondary"])

		// A call with nowhere else to go is never held back by the ramp.
		pinned := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"primary"}})
		for range 5 {
			resp, err := c.Complete(pinned, chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "primary", resp.Upstream)
		}

		// Halfway, the rate has doubled five times: about 32 a second.
		time.Sleep(4 * time.Second)
		half := served(100, 10*time.Millisecond)
		assert.Greater(t, half["primary"], 20)
		assert.Less(t, half["primary"], 60)

		// After the ramp, everything is back.
		time.Sleep(5 * time.Second)
		assert.Equal(t, map[string]int{"primary": 50}, served(50, 10*time.Millisecond))
	})
}

// Without the option, a closed breaker takes all the traffic back at once.
func TestNoRecoveryRampByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Fail(500).Times(3), fake.Reply("primary").Forever())
		secondary := fake.New(fake.Reply("secondary").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 3, OpenTimeout: 10 * time.Second,
				HalfOpenProbes: 1, SuccessesToClose: 1}))
		for range 3 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		time.Sleep(10 * time.Second)
		for range 20 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "primary", resp.Upstream)
		}
	})
}

func TestRecoveryRampChecked(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 2 * time.Hour, time.Duration(1<<63 - 1)} {
		_, err := llmclient.New(up("a", fake.New()), llmclient.WithRecoveryRamp(d))
		assert.ErrorContains(t, err, "WithRecoveryRamp", "%v", d)
	}
	_, err := llmclient.New(up("a", fake.New()), llmclient.WithRecoveryRamp(0))
	assert.NoError(t, err)
}
