package llmclient_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream the caller closes while its continuation waits for the fallback's first token
// ends its call once, with its event.Call, as a stream closed before the cut does; its
// budget keeps nothing reserved.
func TestStreamClosedDuringItsContinuationEndsItsCall(t *testing.T) {
	for _, mode := range []string{"closed while continuing", "closed before the cut"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
				a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
				if mode == "closed before the cut" {
					a = fake.New(fake.Stream("one ", "two ", "three").StallAfter(2, time.Hour))
				}
				b := fake.New(fake.Stream("one ", "two ", "three").StallFirst(time.Hour))
				var log eventLog
				c := newClient(t, pricedUp("a", a, m), pricedUp("b", b, m), llmclient.WithObserver(log.observe),
					llmclient.WithBudget(budget.Budget{Name: "cap", Cap: 1000 * pricing.Dollar}))
				s, err := c.Stream(context.Background(), budgetReq())
				require.NoError(t, err)
				go func() {
					time.Sleep(5 * time.Second)
					s.Close()
				}()
				text, err := readAll(s)
				synctest.Wait()
				assert.Equal(t, "one two ", text)
				assert.NoError(t, err, "the caller's own Close")
				calls := log.kinds(event.Call)
				require.Len(t, calls, 1, "one event.Call for one call")
				st, err := c.Budget(context.Background(), "cap", "")
				require.NoError(t, err)
				assert.Zero(t, st.Reserved)
				assert.Positive(t, st.Spent)
				assert.Zero(t, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}

// The same through the Transport: a body closed while its continuation waits for the
// fallback ends its call once.
func TestTransportBodyClosedDuringItsContinuationEndsItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := oaiStream("s1", 100, 7, 99, "Hel", "lo")[:3]
		a, b := newScript(sseStep(cut...)), newScript(sseStep(ev{-1, ""}))
		var log eventLog
		c, rt := contPair(t, a, b, llmclient.WithObserver(log.observe))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		require.NoError(t, err)
		go func() {
			time.Sleep(5 * time.Second)
			resp.Body.Close()
		}()
		_, _ = io.ReadAll(resp.Body)
		synctest.Wait()
		assert.Len(t, log.kinds(event.Continuation), 1)
		assert.Len(t, log.kinds(event.Call), 1, "one event.Call for one call")
		assert.Zero(t, c.InFlight("a")+c.InFlight("b"))
	})
}
